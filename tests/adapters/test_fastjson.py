"""The watch decoder gives what the standard library gives, orjson or not."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.adapters import fastjson

DOCS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(DOCS)
def test_round_trips_as_the_standard_library(doc: object) -> None:
    """Finite floats only: orjson writes non-finite ones (not JSON) as null."""
    encoded = fastjson.dumps(doc)
    assert fastjson.loads(encoded) == json.loads(encoded) == doc


def test_what_orjson_refuses_goes_to_the_standard_library() -> None:
    doc = fastjson.loads(b'{"big": 123456789012345678901234567890, "nan": NaN}')
    assert doc["big"] == 123456789012345678901234567890 and math.isnan(doc["nan"])
    assert fastjson.loads(fastjson.dumps({"big": 2**70}))["big"] == 2**70


def test_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        fastjson.loads(b'{"type": "ADDED", "object": {')
