"""TOSA specification: which version, profiles and extensions a compile targets.

One `TosaSpecification` decides which lowering rules apply, which dtypes are legal and which checks run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PROFILES = ("FP", "INT")
# Extensions from the TOSA 1.0 specification that this toolkit understands.
_EXTENSIONS = ("int16", "int4", "bf16", "fp8e4m3", "fp8e5m2", "fft", "variable", "controlflow",
               "doubleround", "inexactround", "u55")
# The short names ExecuTorch's documentation uses for the same extensions.
_ALIASES = {"cf": "controlflow", "var": "variable"}
_SPEC_RE = re.compile(r"^TOSA-(\d+)\.(\d+)(?:\.(\d+))?((?:\+[A-Za-z0-9_]+)+)$")


@dataclass(frozen=True)
class TosaSpecification:
    """A TOSA target: version, profiles ("FP", "INT") and extensions (e.g. "int16").

    Build one with `TosaSpecification.create_from_string("TOSA-1.0+INT+int16")`. The pseudo-extension
    "u55" restricts the INT profile to the operator subset that Ethos-U55/U65 run.
    """

    version: tuple[int, int]
    profiles: frozenset[str]
    extensions: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def create_from_string(text: str) -> TosaSpecification:
        """Parse "TOSA-<major>.<minor>+<PROFILE>[+<PROFILE>][+<extension>...]"."""
        valid = ('valid forms: "TOSA-1.0+FP", "TOSA-1.0+INT", "TOSA-1.0+FP+INT", with extensions after "+" '
                 f"from {list(_EXTENSIONS)} (e.g. \"TOSA-1.0+INT+int16\", \"TOSA-1.0+FP+cf\")")
        if not isinstance(text, str):
            raise ValueError(f"TOSA specification must be a string, got {type(text).__name__}; {valid}")
        match = _SPEC_RE.match(text.strip())
        if not match:
            raise ValueError(f"unknown TOSA specification {text!r}; {valid}")
        major, minor = int(match.group(1)), int(match.group(2))
        if (major, minor) != (1, 0):
            raise ValueError(_version_message(major, minor, text, valid))
        profiles, extensions = set(), set()
        for part in match.group(4).strip("+").split("+"):
            if part.upper() in _PROFILES and part.isupper():
                profiles.add(part)
            elif _ALIASES.get(part, part) in _EXTENSIONS:
                extensions.add(_ALIASES.get(part, part))
            else:
                raise ValueError(f"unknown profile or extension {part!r} in {text!r}; {valid}")
        if not profiles:
            raise ValueError(f"no profile (FP or INT) in {text!r}; {valid}")
        if "int16" in extensions and "INT" not in profiles:
            raise ValueError(f"extension 'int16' needs the INT profile in {text!r}; {valid}")
        return TosaSpecification((major, minor), frozenset(profiles), frozenset(extensions))

    @property
    def control_flow(self) -> bool:
        """True with the control-flow extension ("+cf" or "+controlflow"): COND_IF, WHILE_LOOP."""
        return "controlflow" in self.extensions

    @staticmethod
    def coerce(spec: TosaSpecification | str) -> TosaSpecification:
        """Accept a specification or its string form."""
        if isinstance(spec, TosaSpecification):
            return spec
        return TosaSpecification.create_from_string(spec)

    def support_float(self) -> bool:
        return "FP" in self.profiles

    def support_integer(self) -> bool:
        return "INT" in self.profiles

    def support_extension(self, name: str) -> bool:
        return name in self.extensions

    @property
    def is_u55_subset(self) -> bool:
        """True when only the Ethos-U55/U65 operator subset may be used."""
        return "u55" in self.extensions

    def __str__(self) -> str:
        parts = [f"TOSA-{self.version[0]}.{self.version[1]}"]
        parts += [p for p in _PROFILES if p in self.profiles]
        parts += sorted(self.extensions)
        return "+".join(parts)


def _version_message(major: int, minor: int, text: str, valid: str) -> str:
    """Why a well-formed spec string of another TOSA version is refused, and what to write instead."""
    if (major, minor) == (0, 80):
        return (f"TOSA 0.80 ({text!r}) is not supported: this toolkit emits TOSA 1.0; write "
                '"TOSA-1.0+INT" for 0.80\'s BI profile and "TOSA-1.0+FP" for MI; ' + valid)
    if (major, minor) == (1, 1):
        return (f"TOSA 1.1 ({text!r}) is not supported: tosa-tools ships it only as a draft (its serializer "
                "stamps 1.1.0-draft, vela reads 1.0), so this toolkit emits TOSA 1.0 graphs; write the same "
                "profiles and extensions after \"TOSA-1.0\" (the FFT operators are in 1.0's fft extension: "
                "\"TOSA-1.0+FP+fft\"); " + valid)
    return f"unsupported TOSA version {major}.{minor} in {text!r}: only 1.0 is supported; {valid}"
