"""The one decoding guard for everything read from the cluster: annotations, pod fields,
checkpoint files, inventories.

Whatever a node, a pod's author or a compromised agent writes, a reader must either return a value
or raise its own error, never something the caller did not expect. Python's decoders raise a
zoo of exceptions on hostile input: `ValueError` for an integer of more than 4,300 digits (the
int-digits limit, also hit by `int(text)` and `str(number)`), `RecursionError` for 100,000
nested arrays, `OverflowError`, `TypeError` for a value of the wrong type, and a huge value costs
memory and time before any check runs. So every reader:

* checks the size first (`MAX_*` below; the API server itself caps all of an object's
  annotations at 256 KiB, `TotalAnnotationSizeLimitB` in apimachinery's ValidateAnnotations,
  so a bound here is about reading cost, not about refusing valid objects);
* decodes with `load_json`, and runs its validation inside `guard`, which turn any decoding
  error into the reader's own error class, with a one-line message naming the field.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vgpu.core.errors import VgpuError

MAX_INVENTORY_CHARS = 64 << 10
"""`<domain>/gpu-inventory`: about 250 characters per GPU, so room for 200 GPUs."""
MAX_ASSIGNMENT_CHARS = 64 << 10
"""`vgpu.io/assignment`: about 120 characters per share of a container."""
MAX_ADMITTED_CHARS = 16 << 10
"""`vgpu.io/admitted`: container names (at most 63 characters each) of one pod."""
MAX_HOLDS_CHARS = 16 << 10
"""`vgpu.io/strict-holds` on the leader Lease: a start time per strict queue (about 40
characters each), so room for hundreds of strict queues."""
MAX_NAME_CHARS = 253
"""A gang's name (a DNS subdomain, like the object names it mirrors)."""
MAX_SMALL_CHARS = 64
"""Small numbers written by hand: a gang size, a cores limit."""

DECODING_ERRORS = (ValueError, RecursionError, OverflowError, TypeError, MemoryError)
"""What Python's decoders and conversions raise on hostile input."""
MALFORMED = (*DECODING_ERRORS, AttributeError, KeyError, IndexError)
"""What reading a decoded object of the wrong shape raises too (a string where a map belongs)."""


class DecodeError(VgpuError, ValueError):
    """A value read from the cluster cannot be decoded; the message names the field."""


def brief(err: BaseException) -> str:
    """The error's kind and first line, short: a message must not echo a megabyte back."""
    try:
        text = str(err).splitlines()[0] if str(err) else ""
    except Exception:
        text = ""
    return f"{type(err).__name__}: {text[:120]}" if text else type(err).__name__


def check_size(text: str, field: str, limit: int, error: Callable[[str], Exception]) -> None:
    """Refuse text longer than `limit` characters before anything parses it."""
    if len(text) > limit:
        raise error(f"{field}: {len(text)} characters, more than the {limit} allowed")


def load_json(
    text: object, field: str, limit: int, error: Callable[[str], Exception] = DecodeError
) -> object:
    """Decode bounded JSON text; any failure is `error(message naming field)`."""
    if not isinstance(text, str):
        raise error(f"{field}: expected a string, got {type(text).__name__}")
    check_size(text, field, limit, error)
    try:
        return json.loads(text)
    except DECODING_ERRORS as err:
        raise error(f"{field}: not valid JSON ({brief(err)})") from None


@contextmanager
def guard(
    field: str,
    error: Callable[[str], Exception] = DecodeError,
    errors: tuple[type[BaseException], ...] = DECODING_ERRORS,
) -> Iterator[None]:
    """Run a reader's validation: any of `errors` inside becomes `error`, naming `field` (pass
    `MALFORMED` where the reader walks a whole object). The reader's own errors pass through."""
    try:
        yield
    except VgpuError:
        raise
    except errors as err:
        raise error(f"{field}: unreadable ({brief(err)})") from None
