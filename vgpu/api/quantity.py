"""Kubernetes resource quantities ("250m", "1.5", "16Gi", "1e3") as exact numbers: the one
parser every vgpu component uses (extender, node agent, report).

The grammar is Kubernetes' own (k8s.io/apimachinery/pkg/api/resource/quantity.go):

    quantity ::= [+-] number suffix
    number   ::= digits | digits "." digits | digits "." | "." digits
    suffix   ::= "" | n | u | m | k | M | G | T | P | E | Ki | Mi | Gi | Ti | Pi | Ei
               | ("e" | "E") [+-] digits

Values reach the extender from any pod author and any request body, so the work is bounded
before anything is computed: the text is at most `MAX_TEXT` characters and the decimal exponent
at most `MAX_EXPONENT` either way, so "1e10000000" is refused at once instead of computing
10**10000000. Values beyond what any node holds (`MAX_CPU_MILLI`, `MAX_MEMORY_MIB`,
`MAX_DEVICES`) are refused naming the field.

kube-scheduler counts CPU in milli-cores and memory in bytes; vgpu keeps milli-cores and MiB.
Requests are rounded up (never under-count what a pod asks), capacities down.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from vgpu.core.errors import InvalidRequest

MAX_TEXT = 64
"""Characters in a quantity (Kubernetes writes none longer than about 30)."""
MAX_EXPONENT = 40
"""Decimal exponent either way, the suffix's included (E is 10**18, n is 10**-9)."""
MAX_CPU_MILLI = 10**9
"""A million cores: beyond any node."""
MAX_MEMORY_MIB = 2**30
"""One PiB, in MiB: beyond any node."""
MAX_DEVICES = 10**7
"""Extended-resource counts (vGPU core units, memory blocks): beyond any node."""

_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_QUANTITY = re.compile(
    r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)", re.ASCII
)
_MIB = 2**20
_HINT = 'use e.g. "500m", "2Gi" or "30"'
BEYOND_CAPACITY = "is beyond any node's capacity"
"""The end of the problem `parse_quantity` names for a well-formed quantity too large to be met."""


def parse_quantity(value: object, field: str) -> Fraction:
    """The exact value of a quantity; raises `InvalidRequest` naming `field`."""
    text = _text(value, field)
    match = _QUANTITY.fullmatch(text)
    if match is None or not (match[2] or match[3]):
        raise InvalidRequest(field, f"{_shown(value)} is not a quantity", _HINT)
    sign, whole, fraction, exponent, suffix = match.groups()
    digits = (whole + (fraction or "")).lstrip("0")
    if exponent is not None:
        if len(exponent.lstrip("+-")) > 4 or abs(int(exponent)) > MAX_EXPONENT:
            raise InvalidRequest(field, f"{_shown(value)}: exponent out of range", _HINT)
        power, binary = int(exponent), 0
    else:
        power, binary = _DECIMAL.get(suffix or "", 0), _BINARY.get(suffix or "", 0)
    if not digits:
        return Fraction(0)
    # Order of magnitude before computing: integer digits + decimal power + binary power.
    magnitude = len(whole.lstrip("0")) + power + (binary * 3 + 9) // 10
    if magnitude > 20:
        raise InvalidRequest(field, f"{_shown(value)} {BEYOND_CAPACITY}", _HINT)
    scale = power - len(fraction or "")
    if scale < -MAX_EXPONENT - MAX_TEXT:
        raise InvalidRequest(field, f"{_shown(value)}: exponent out of range", _HINT)
    amount = Fraction(int(digits) * 2**binary) * Fraction(10) ** scale
    return -amount if sign == "-" else amount


def _text(value: object, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidRequest(field, f"{_shown(value)} is not a quantity", _HINT)
    if isinstance(value, int):
        if value.bit_length() > 64:
            raise InvalidRequest(field, "the number is beyond any node's capacity", _HINT)
        return str(value)
    text = repr(value) if isinstance(value, float) else value
    if len(text) > MAX_TEXT:
        raise InvalidRequest(field, f"{len(text)} characters are not a quantity", _HINT)
    return text


def _shown(value: object) -> str:
    if not isinstance(value, str | int | float):  # a list or map, maybe nested past repr's depth
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _non_negative(amount: Fraction, field: str) -> Fraction:
    if amount < 0:
        raise InvalidRequest(field, "a negative amount is not a resource", _HINT)
    return amount


def _within(count: int, field: str, limit: int, unit: str) -> int:
    if count > limit:
        raise InvalidRequest(
            field,
            f"{count} {unit} is beyond any node's capacity (at most {limit})",
            "ask for what one node can hold",
        )
    return count


def milli_ceil(value: object, field: str) -> int:
    """A CPU request in milli-cores, rounded up."""
    amount = _non_negative(parse_quantity(value, field), field)
    return _within(math.ceil(amount * 1000), field, MAX_CPU_MILLI, "milli-cores")


def milli_floor(value: object, field: str) -> int:
    """A CPU capacity in milli-cores, rounded down."""
    amount = _non_negative(parse_quantity(value, field), field)
    return _within(math.floor(amount * 1000), field, MAX_CPU_MILLI, "milli-cores")


def mib_ceil(value: object, field: str) -> int:
    """A memory request (bytes) in MiB, rounded up."""
    amount = _non_negative(parse_quantity(value, field), field)
    return _within(math.ceil(amount / _MIB), field, MAX_MEMORY_MIB, "MiB")


def mib_floor(value: object, field: str) -> int:
    """A memory capacity (bytes) in MiB, rounded down."""
    amount = _non_negative(parse_quantity(value, field), field)
    return _within(math.floor(amount / _MIB), field, MAX_MEMORY_MIB, "MiB")


def whole_count(value: object, field: str) -> int:
    """A device count (extended resource): a whole, non-negative number."""
    if isinstance(value, str) and len(value) <= 12 and value.isascii() and value.isdigit():
        # What pods write ("30"): the grammar's answer without it (the report reads 10,000s).
        return _within(int(value), field, MAX_DEVICES, "devices")
    try:
        amount = _non_negative(parse_quantity(value, field), field)
    except InvalidRequest as err:
        raise InvalidRequest(field, f"{err.problem}: not a whole number", "use e.g. 30") from None
    if amount.denominator != 1:
        raise InvalidRequest(field, f"{_shown(value)} is not a whole number", "use e.g. 30")
    return _within(int(amount), field, MAX_DEVICES, "devices")
