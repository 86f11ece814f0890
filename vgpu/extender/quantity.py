"""Kubernetes resource quantities ("250m", "1.5", "16Gi", "1e3") as exact numbers.

kube-scheduler counts CPU in milli-cores and memory in bytes; the extender keeps milli-cores and
MiB. Requests are rounded up (never under-count what a pod asks), capacities down.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from vgpu.core.errors import InvalidRequest

_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)
_MIB = Fraction(2**20)


def parse_quantity(value: object, field: str) -> Fraction:
    """The exact value of a quantity; raises `InvalidRequest` naming `field`."""
    if isinstance(value, bool):
        raise InvalidRequest(field, f"{value!r} is not a quantity", 'use e.g. "500m" or "2Gi"')
    if isinstance(value, int):
        return Fraction(value)
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise InvalidRequest(field, f"{value!r} is not a quantity", 'use e.g. "500m" or "2Gi"')
    number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent is not None:
        return amount * Fraction(10) ** int(exponent)
    return amount * _SUFFIX[suffix or ""]


def milli_ceil(value: object, field: str) -> int:
    """A CPU request in milli-cores, rounded up."""
    return math.ceil(parse_quantity(value, field) * 1000)


def milli_floor(value: object, field: str) -> int:
    """A CPU capacity in milli-cores, rounded down."""
    return math.floor(parse_quantity(value, field) * 1000)


def mib_ceil(value: object, field: str) -> int:
    """A memory request (bytes) in MiB, rounded up."""
    return math.ceil(parse_quantity(value, field) / _MIB)


def mib_floor(value: object, field: str) -> int:
    """A memory capacity (bytes) in MiB, rounded down."""
    return math.floor(parse_quantity(value, field) / _MIB)


def whole_count(value: object, field: str) -> int:
    """A device count (extended resource): a non-negative whole number."""
    amount = parse_quantity(value, field)
    if amount < 0 or amount.denominator != 1:
        raise InvalidRequest(field, f"{value!r} is not a whole, non-negative number", "use e.g. 30")
    return int(amount)
