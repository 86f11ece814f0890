"""The shipped `vgpu-limit-vgpu-containers` ValidatingAdmissionPolicy, evaluated (cel-python):
it refuses a pod with more vGPU containers than the extender reads, naming the fix,
and states the very number `vgpu.api.podasks.MAX_VGPU_CONTAINERS` holds. The chart template and
daemonset/ are compared by `hack/chart.py check`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.cel import cel, refusals
from tests.pods import container, pod_obj
from vgpu.api.podasks import MAX_VGPU_CONTAINERS, pod_asks

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "daemonset" / "container-cap-policy.yaml"


def _spec() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(POLICY.read_text()) if d]
    (policy,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    return dict(policy["spec"])


def refused(pod: dict[str, Any]) -> list[str]:
    """The messages of the validations `pod` fails at creation (empty: admitted)."""
    return refusals(_spec(), {"object": cel(pod)})


def _pod(init: int, app: int, plain: int = 2) -> dict[str, Any]:
    """`init` + `app` containers asking one core each, and `plain` asking nothing of vgpu."""
    return pod_obj(
        "p",
        [container(f"a{i}", cores=1) for i in range(app)]
        + [container(f"plain{i}", limits={"cpu": "1"}) for i in range(plain)],
        init=[container(f"i{i}", cores=1) for i in range(init)],
    )


@pytest.mark.parametrize("init", [0, 1, MAX_VGPU_CONTAINERS // 2])
def test_the_policy_and_the_extender_refuse_the_same_pods(init: int) -> None:
    at_cap = _pod(init, MAX_VGPU_CONTAINERS - init)
    past_cap = _pod(init, MAX_VGPU_CONTAINERS - init + 1)
    assert refused(at_cap) == [] and not pod_asks(at_cap).problems
    (message,) = refused(past_cap)
    assert pod_asks(past_cap).problems
    assert f"{MAX_VGPU_CONTAINERS + 1} containers ask vgpu.io/ devices" in message
    assert f"split the work into pods of at most {MAX_VGPU_CONTAINERS} vGPU containers" in message


def test_a_request_without_a_limit_counts_too() -> None:
    pod = _pod(0, MAX_VGPU_CONTAINERS)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"vgpu.io/memory": "1"}}
    pod["spec"]["containers"].append(container("extra", cores=1))
    assert refused(pod)


def test_the_chart_template_states_the_policy_as_rendered() -> None:
    """Daemonset/ is rendered from the chart; the number is written once, in the template."""
    template = (ROOT / "charts" / "vgpu" / "templates" / "container-cap-policy.yaml").read_text()
    assert f'expression: "{MAX_VGPU_CONTAINERS}"' in template
    assert "container-cap-policy.yaml" in (ROOT / "daemonset" / "kustomization.yaml").read_text()
