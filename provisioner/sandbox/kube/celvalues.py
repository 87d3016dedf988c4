"""The two value types the DRA CEL environment adds to CEL's own: semantic versions (attributes with
a `version` value, and `semver('1.2.3')`) and resource quantities (capacities, and
`quantity('80Gi')`).

Sources: kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go
(getAttributeValue parses `version` with blang/semver's strict Parse; capacities become
apiservercel.Quantity); k8s.io/apiserver pkg/cel/library semverlib.go and quantity.go (the
functions); k8s.io/apimachinery pkg/api/resource quantity.go (ParseQuantity's suffixes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

# semver.org 2.0.0, as blang/semver/v4 Parse reads it: no leading zeros, no "v" prefix.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
# ParseQuantity: a signed decimal, then a binary suffix, a decimal SI suffix or an exponent.
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
INT64_MAX = 2**63 - 1


class BadValue(Exception):
    """A value that cannot be built (a malformed version or quantity): a CEL runtime error."""


@dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()

    TYPE = "kubernetes.Semver"

    @classmethod
    def parse(cls, text: str) -> Semver:
        match = _SEMVER.match(text)
        if not match:
            raise BadValue(f"could not parse semver {text!r}")
        pre = tuple(match.group(4).split(".")) if match.group(4) else ()
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3)), pre)

    def compare(self, other: Semver) -> int:
        """Precedence per semver.org §11: numbers, then a pre-release sorts before the release,
        then identifiers one by one (numeric below alphanumeric); build metadata is ignored."""
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if self.prerelease == other.prerelease:
            return 0
        if not self.prerelease or not other.prerelease:
            return 1 if not self.prerelease else -1
        for a, b in zip(self.prerelease, other.prerelease, strict=False):
            if a == b:
                continue
            if a.isdigit() and b.isdigit():
                return -1 if int(a) < int(b) else 1
            if a.isdigit() != b.isdigit():
                return -1 if a.isdigit() else 1
            return -1 if a < b else 1
        return -1 if len(self.prerelease) < len(other.prerelease) else 1


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    text: str

    TYPE = "kubernetes.Quantity"

    @classmethod
    def parse(cls, text: str) -> Quantity:
        match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
        if not match:
            raise BadValue(f"quantities must match the regular expression {_QUANTITY.pattern!r}: {text!r}")
        number, suffix = Fraction(match.group(1)), match.group(2) or ""
        if suffix in _BINARY:
            number *= _BINARY[suffix]
        elif suffix in _DECIMAL:
            number *= Fraction(10) ** _DECIMAL[suffix]
        elif suffix:
            number *= Fraction(10) ** int(suffix[1:])
        return cls(number, text)

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)
