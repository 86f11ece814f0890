"""The one Kubernetes quantity parser: the grammar, exact values, bounded work, refusals that
name the field."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.quantity import (
    MAX_CPU_MILLI,
    MAX_MEMORY_MIB,
    mib_ceil,
    mib_floor,
    milli_ceil,
    milli_floor,
    parse_quantity,
    whole_count,
)
from vgpu.core.errors import InvalidRequest


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", Fraction(1, 4)),
        ("1.5", Fraction(3, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1E", Fraction(10**18)),
        ("2k", Fraction(2000)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("+3", Fraction(3)),
        ("-3", Fraction(-3)),
        ("12e-3", Fraction(12, 1000)),
        ("100n", Fraction(100, 10**9)),
        ("7u", Fraction(7, 10**6)),
        ("0", Fraction(0)),
        (3, Fraction(3)),
        (0.5, Fraction(1, 2)),
    ],
)
def test_the_kubernetes_grammar_gives_exact_values(text: object, value: Fraction) -> None:
    assert parse_quantity(text, "f") == value


@pytest.mark.parametrize(
    "text",
    ["", " 1", "1 ", "1K", "1kb", "1.2.3", "e3", "1e", "1e+", "--1", "1Gi3", "0x10", "∞", "1_000"],
)
def test_what_kubernetes_refuses_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_quantity(text, "spec.x.cpu")
    assert err.value.field == "spec.x.cpu"


@pytest.mark.timeout(5)
@pytest.mark.parametrize(
    "text", ["1e10000000", "1e5000", "9" * 10_000, "1e-10000000", "1" + "0" * 30 + "Ei"]
)
def test_absurd_quantities_are_refused_without_computing_them(text: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_quantity(text, "limits.cpu")
    assert err.value.field == "limits.cpu"


def test_zero_with_a_huge_exponent_is_refused_too() -> None:
    """The exponent is judged before the digits: no value is computed from it."""
    with pytest.raises(InvalidRequest):
        parse_quantity("0e99999999", "f")


def test_requests_beyond_any_nodes_capacity_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequest, match="beyond any node") as err:
        milli_ceil("1e15", "spec.containers[0].resources.requests.cpu")
    assert err.value.field == "spec.containers[0].resources.requests.cpu"
    with pytest.raises(InvalidRequest, match="beyond any node"):
        mib_ceil("64Ei", "memory")
    with pytest.raises(InvalidRequest, match="beyond any node"):
        whole_count("1e12", "limits[vgpu.io/cores]")
    assert milli_ceil(str(MAX_CPU_MILLI // 1000), "cpu") == MAX_CPU_MILLI
    assert mib_ceil(f"{MAX_MEMORY_MIB}Mi", "memory") == MAX_MEMORY_MIB


def test_negative_requests_and_capacities_are_refused() -> None:
    for convert in (milli_ceil, milli_floor, mib_ceil, mib_floor, whole_count):
        with pytest.raises(InvalidRequest, match="negative"):
            convert("-1", "f")


def test_requests_round_up_and_capacities_down() -> None:
    assert milli_ceil("1n", "cpu") == 1
    assert milli_floor("1999u", "cpu") == 1
    assert mib_ceil("1", "memory") == 1
    assert mib_floor("1Mi", "memory") == 1
    assert mib_floor("1048575", "memory") == 0


def test_device_counts_are_whole() -> None:
    assert whole_count("1k", "n") == 1000
    assert whole_count("30", "n") == 30
    with pytest.raises(InvalidRequest, match="whole"):
        whole_count("1500m", "n")


@given(st.one_of(st.text(max_size=80), st.binary(max_size=40), st.integers(), st.floats()))
def test_any_value_is_a_number_or_an_invalid_request(value: object) -> None:
    try:
        parse_quantity(value, "f")
    except InvalidRequest as err:
        assert err.field == "f"


@given(
    st.integers(min_value=0, max_value=10**9),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-2"]),
)
def test_integers_with_any_suffix_scale_exactly(number: int, suffix: str) -> None:
    scales: dict[str, int | Fraction] = {
        "": 1,
        "m": Fraction(1, 1000),
        "k": 1000,
        "M": 10**6,
        "G": 10**9,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "e3": 1000,
        "e-2": Fraction(1, 100),
    }
    scale = scales[suffix]
    assert parse_quantity(f"{number}{suffix}", "f") == number * scale


def _pod(value: object) -> dict[str, object]:
    limits = {"vgpu.io/cores": value, "vgpu.io/memory": "4"}
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }


@pytest.mark.timeout(5)
def test_the_node_agent_and_the_report_read_asks_with_the_same_parser() -> None:
    from vgpu.inspect.pods import pod_facts
    from vgpu.node.podspec import pod_info

    assert pod_info(_pod("1e1")).containers[0].cores == 10
    assert pod_facts(_pod("1e1")).asks_cores == 10
    poisoned = pod_info(_pod("1e10000000"))
    assert [c.cores for c in poisoned.containers] == [0]
    assert "vgpu.io/cores" in poisoned.problems[0]
    assert pod_facts(_pod("1e10000000")).asks_cores == 0


@pytest.mark.timeout(5)
@pytest.mark.parametrize("value", ["²", "9" * 5000, "1e9", "-1", "10000000"])
def test_number_valued_annotations_are_refused_not_raised(value: str) -> None:
    from vgpu.api.podspec import gang_of
    from vgpu.node.podspec import cores_limit, pod_info

    pod = _pod("10")
    pod["metadata"]["annotations"] = {  # type: ignore[index]
        "vgpu.io/cores-limit": value,
        "vgpu.io/gang-name": "g",
        "vgpu.io/gang-size": value,
    }
    limit, problem = cores_limit(pod_info(pod))
    assert limit is None and problem and "vgpu.io/cores-limit" in problem
    with pytest.raises(InvalidRequest, match="gang-size"):
        gang_of(pod)


@given(st.text(alphabet="0123456789", min_size=1, max_size=12))
def test_plain_digit_counts_read_as_the_grammar_reads_them(text: str) -> None:
    """whole_count's fast path for plain digits (what pods write) agrees with the grammar."""
    amount = parse_quantity(text, "f")
    if amount > 10**7:
        with pytest.raises(InvalidRequest, match="f: "):
            whole_count(text, "f")
    else:
        assert whole_count(text, "f") == amount
