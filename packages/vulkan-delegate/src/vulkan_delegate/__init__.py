"""Placeholder: see the package README."""
