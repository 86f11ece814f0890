"""Every alert in the chart fires for the condition it names and stays silent in normal operation.

Each rule's expression is evaluated by Prometheus's own engine (`.bin/promql eval`, built by
hack/build-tools.sh from hack/tools/promql) over minute-by-minute series, at every minute; the
`for:` clause is applied as Prometheus's rule manager does with a one-minute evaluation interval:
an alert fires at minute T when one result series was present at every evaluation from T - for to
T. A rule added to the chart without a scenario here fails `test_every_alert_has_a_scenario`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from tests.deploy.test_chart import _helm_or_skip
from tests.deploy.test_monitoring import CHART

sys.path.insert(0, str(CHART.parents[1] / "hack"))
import chart

Series = dict[str, list[float | None]]


def _values() -> dict[str, Any]:
    doc = yaml.safe_load((CHART / "values.yaml").read_text())
    return dict(doc["metrics"]["prometheusRule"])


def alert_rules() -> dict[str, dict[str, Any]]:
    """The chart's alert rules by name, their thresholds filled in from values.yaml (what a
    default install renders)."""
    text = (CHART / "templates" / "monitoring" / "prometheusrule.yaml").read_text()
    values = _values()
    text = re.sub(r"\{\{ \$r\.(\w+) \}\}", lambda m: str(values[m.group(1)]), text)
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("{{-"))
    body = re.sub(r"\{\{[^`]*?\}\}", "x", body.replace("{{`", "").replace("`}}", ""))
    doc = yaml.safe_load(body)
    return {r["alert"]: r for group in doc["spec"]["groups"] for r in group["rules"]}


def _minutes(duration: str | None) -> int:
    if not duration:
        return 0
    match = re.fullmatch(r"(\d+)([mh])", duration)
    assert match, duration
    return int(match.group(1)) * (60 if match.group(2) == "h" else 1)


def evaluate(expr: str, series: Series, minutes: int) -> list[dict[str, Any]]:
    """The expression at every minute 0..minutes: one entry per result series, with the
    minutes at which it had a value."""
    doc = {
        "series": [{"metric": m, "values": v} for m, v in series.items()],
        "expr": expr,
        "minutes": minutes,
    }
    done = subprocess.run(
        [chart.tool("promql"), "eval"],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def fires(alert: str, series: Series) -> bool:
    """Whether `alert` is firing at the last minute of `series` (all of one length)."""
    rule = alert_rules()[alert]
    end = max(len(v) for v in series.values()) - 1
    hold = _minutes(rule.get("for"))
    for result in evaluate(str(rule["expr"]), series, end):
        present = set(result["minutes"] or ())
        if all(t in present for t in range(end - hold, end + 1)):
            return True
    return False


def steady(value: float, n: int = 60) -> list[float | None]:
    return [value] * n


def then(first: list[float | None], second: list[float | None]) -> list[float | None]:
    return first + second


def counter(per_minute: float, n: int = 60, start: float = 0.0) -> list[float | None]:
    return [start + per_minute * i for i in range(n)]


def step_up(at: int, n: int = 60) -> list[float | None]:
    """A counter that stays 0 and goes to 1 at minute `at` (one event)."""
    return [0.0 if i < at else 1.0 for i in range(n)]


def buckets(le_of_all: str, per_minute: float, n: int = 60) -> Series:
    """Bind latency histogram buckets where every request lands in bucket `le_of_all`."""
    out: Series = {}
    for le in ("0.01", "1.0", "2.5", "+Inf"):
        rate = per_minute if float(le) >= float(le_of_all) else 0.0
        name = f'vgpu_extender_request_seconds_bucket{{verb="bind",le="{le}"}}'
        out[name] = counter(rate, n)
    return out


@dataclass(frozen=True)
class Scenario:
    real: Series
    """A real condition the alert is for: it must fire."""
    normal: list[Series] = field(default_factory=list)
    """Normal operation (and blips shorter than `for:`): it must stay silent."""


GPU = 'vgpu_gpu_healthy{node="n1",gpu="0"}'
LEADER_A, LEADER_B = 'vgpu_extender_leader{pod="a"}', 'vgpu_extender_leader{pod="b"}'
READY_A, READY_B = 'vgpu_extender_binding_ready{pod="a"}', 'vgpu_extender_binding_ready{pod="b"}'
REFUSED = 'vgpu_node_allocations_total{node="n1",resource="vgpu.io/cores",outcome="refused"}'
ALLOCATED = 'vgpu_node_allocations_total{node="n1",resource="vgpu.io/cores",outcome="granted"}'
OVER = 'vgpu_container_gpu_memory_over_grant_bytes{namespace="a",pod="p",container="c",gpu="0"}'
UNKNOWN = 'vgpu_unknown_process_gpu_memory_bytes{node="n1",gpu="0"}'
PENDING = 'vgpu_extender_pending_containers{node="n1"}'
BINDS = "vgpu_extender_binds_total"
UNPLACEABLE = 'vgpu_extender_gangs{state="unplaceable"}'
RESERVED = 'vgpu_extender_gangs{state="reserved"}'

# One standby replica beside the leader, both scraped: the normal state of a 2-replica install.
TWO_REPLICAS: Series = {
    LEADER_A: steady(1),
    READY_A: steady(1),
    LEADER_B: steady(0),
    READY_B: steady(0),
}

SCENARIOS: dict[str, Scenario] = {
    "VgpuGpuUnhealthy": Scenario(
        real={GPU: then(steady(1, 30), steady(0, 30))},
        normal=[{GPU: steady(1)}, {GPU: then(steady(1, 56), [0, 0, 1, 1])}],
    ),
    "VgpuAdmissionRefusals": Scenario(
        real={REFUSED: step_up(40), ALLOCATED: counter(1)},
        normal=[{REFUSED: steady(0), ALLOCATED: counter(3)}],
    ),
    "VgpuAssignmentMismatch": Scenario(
        real={'vgpu_node_assignment_mismatches_total{node="n1"}': step_up(50)},
        normal=[{'vgpu_node_assignment_mismatches_total{node="n1"}': steady(0)}],
    ),
    "VgpuContainerOverGrant": Scenario(
        real={OVER: then(steady(0, 40), steady(2**30, 20))},
        normal=[{OVER: steady(0)}, {OVER: then(steady(0, 57), [2**20, 0, 0])}],
    ),
    "VgpuUnknownGpuProcess": Scenario(
        real={UNKNOWN: then(steady(0, 30), steady(5 * 2**20, 30))},
        normal=[{UNKNOWN: steady(0)}, {UNKNOWN: then(steady(0, 50), steady(2**20, 10))}],
    ),
    "VgpuExtenderNotReady": Scenario(
        real={READY_A: then(steady(1, 40), steady(0, 20)), LEADER_A: steady(1)},
        normal=[TWO_REPLICAS],
    ),
    "VgpuExtenderLeaderStale": Scenario(
        real={LEADER_A: steady(1), READY_A: then(steady(1, 40), steady(0, 20))},
        normal=[TWO_REPLICAS, {LEADER_A: steady(1), READY_A: then(steady(0, 2), steady(1, 58))}],
    ),
    "VgpuExtenderNoLeader": Scenario(
        real={LEADER_A: then(steady(1, 50), steady(0, 10)), LEADER_B: steady(0)},
        normal=[
            TWO_REPLICAS,
            # a handover: the Lease moves from a to b within a minute
            {
                LEADER_A: then(steady(1, 55), steady(0, 5)),
                LEADER_B: then(steady(0, 56), steady(1, 4)),
            },
        ],
    ),
    "VgpuExtenderSplitLeadership": Scenario(
        real={LEADER_A: steady(1), LEADER_B: then(steady(0, 50), steady(1, 10))},
        normal=[
            TWO_REPLICAS,
            {
                LEADER_A: then(steady(1, 56), steady(0, 4)),
                LEADER_B: then(steady(0, 55), steady(1, 5)),
            },
        ],
    ),
    "VgpuPendingAdmission": Scenario(
        real={PENDING: then(steady(0, 40), steady(2, 20))},
        normal=[{PENDING: [float(i % 3 == 0) for i in range(60)]}],
    ),
    "VgpuBindLatencyHigh": Scenario(
        real=buckets("2.5", 30),
        normal=[buckets("0.01", 30)],
    ),
    "VgpuBindErrors": Scenario(
        real={f'{BINDS}{{outcome="ok"}}': counter(10), f'{BINDS}{{outcome="error"}}': step_up(55)},
        normal=[
            {
                f'{BINDS}{{outcome="ok"}}': counter(10),
                f'{BINDS}{{outcome="error"}}': steady(0),
                # a gang's members wait for admission or for their peers: by design, not errors
                f'{BINDS}{{outcome="deferred"}}': counter(4),
            }
        ],
    ),
    "VgpuInvalidPods": Scenario(
        real={"vgpu_extender_invalid_pods_total": step_up(30)},
        normal=[{"vgpu_extender_invalid_pods_total": steady(0)}],
    ),
    "VgpuGangsUnplaceable": Scenario(
        real={UNPLACEABLE: then(steady(0, 20), steady(1, 40)), RESERVED: steady(0)},
        normal=[
            {UNPLACEABLE: steady(0), RESERVED: steady(2)},
            # a gang that did not fit and was deleted: the gauge follows its pods
            {UNPLACEABLE: then(steady(0, 20), then(steady(1, 20), steady(0, 20)))},
        ],
    ),
}


@pytest.fixture(autouse=True)
def _needs_promql() -> None:
    _helm_or_skip("promql")


def test_every_alert_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(alert_rules())


@pytest.mark.parametrize("alert", sorted(SCENARIOS))
def test_alert_fires_for_its_condition(alert: str) -> None:
    assert fires(alert, SCENARIOS[alert].real), alert


@pytest.mark.parametrize("alert", sorted(SCENARIOS))
def test_alert_stays_silent_in_normal_operation(alert: str) -> None:
    assert SCENARIOS[alert].normal, f"{alert}: no normal operation given"
    for i, series in enumerate(SCENARIOS[alert].normal):
        assert not fires(alert, series), f"{alert}: normal case {i} fired"


def test_an_extender_that_exports_nothing_is_not_ready() -> None:
    """Every replica down (no series at all): the not-ready alert fires on `vector(0)`."""
    assert fires("VgpuExtenderNotReady", {"vgpu_unrelated": steady(1)})
    assert fires("VgpuExtenderNoLeader", {"vgpu_unrelated": steady(1)})


def test_the_for_clause_is_honoured() -> None:
    """A condition shorter than `for:` stays silent; one just long enough fires."""
    assert not fires("VgpuGpuUnhealthy", {GPU: then(steady(1, 56), steady(0, 4))})
    assert fires("VgpuGpuUnhealthy", {GPU: then(steady(1, 54), steady(0, 6))})


def test_evaluation_uses_prometheus_semantics() -> None:
    """`increase` extrapolates and `or vector(0)` fills an empty result, as in Prometheus."""
    [result] = evaluate("sum(increase(x_total[10m]))", {"x_total": counter(1, 30)}, 29)
    assert result["values"][-1] == pytest.approx(10.0, rel=0.2)
    [empty] = evaluate("sum(y) or vector(0)", {"x": steady(1, 5)}, 4)
    assert empty["values"] == [0, 0, 0, 0, 0]
