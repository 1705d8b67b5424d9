"""Exceptions that name the problem and the fix."""


class ArmToolkitError(Exception):
    """Base class for this toolkit's errors."""


class MissingToolError(ArmToolkitError, ImportError):
    """A required external tool or package is not installed; the message gives the install command."""


class UnsupportedModelError(ArmToolkitError, ValueError):
    """The model or its inputs cannot be compiled as given; the message says why and what to change."""


class LoweringError(ArmToolkitError, RuntimeError):
    """A supported node failed to lower: this is a bug in the toolkit, please report it."""


class ReferenceModelError(ArmToolkitError, RuntimeError):
    """The TOSA reference model rejected a graph or failed to run it."""
