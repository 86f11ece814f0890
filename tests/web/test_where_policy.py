"""Where a waiting pod could go is placed with the extender's policies as the view is told
them (`--policy`, `--allow-pod-policy`): a lone pod with the policy its `vgpu.io/policy`
names, a gang with the default, and a pod naming a policy not allowed gets the extender's
refusal, as the extender's filter gives it."""

from __future__ import annotations

import argparse

import pytest

from tests.inspect.builders import node, pod
from tests.web.test_pages import STATUS
from tests.web.test_where import A100, could_go_rows
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.core.policy.specs import parse_policy
from vgpu.inspect.cli import configure
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web.detail import pod_page
from vgpu.inspect.web.view import build_view
from vgpu.inspect.web.where import Policies

BINPACK, SPREAD = parse_policy("binpack"), parse_policy("spread")


def _snapshot(*waiting: dict[str, object]) -> Snapshot:
    """One node of two GPUs, half of GPU 0 held: binpack fills GPU 0, spread takes GPU 1."""
    held = pod("a/half", node="n1", shares={"main": [(0, 50, 8192)]})
    return Snapshot((node("n1", [A100] * 2),), (held, *waiting))


def _waiting(key: str, policy: str | None = None, gang: bool = False) -> dict[str, object]:
    notes = {"vgpu.io/policy": policy} if policy else {}
    if gang:
        notes |= {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "1"}
    return pod(key, asks={"main": (30, 0)}, phase="Pending", annotations=notes or None)


def _page(snapshot: Snapshot, name: str, policies: Policies) -> str:
    view = build_view(snapshot, None, DEFAULT_NAMES, policies=policies)
    return pod_page(view, name, STATUS) or ""


def _gpu(page: str) -> str:
    (row,) = could_go_rows(page)
    return row.split("|")[2]


@pytest.mark.parametrize(("policy", "gpu"), [(BINPACK, "GPU 0"), (SPREAD, "GPU 1")])
def test_a_pod_naming_no_policy_is_placed_with_the_extenders_policy(
    policy: object, gpu: str
) -> None:
    page = _page(_snapshot(_waiting("b/w")), "b/w", Policies(policy))  # type: ignore[arg-type]
    assert _gpu(page).startswith(gpu)
    assert f"(policy {policy.name}, on the Ready nodes)" in page  # type: ignore[attr-defined]


def test_a_pod_naming_an_allowed_policy_is_placed_with_it() -> None:
    page = _page(_snapshot(_waiting("b/w", "spread")), "b/w", Policies(BINPACK, (SPREAD,)))
    assert _gpu(page).startswith("GPU 1") and "(policy spread," in page


def test_a_pod_naming_a_policy_not_allowed_gets_the_extenders_refusal() -> None:
    page = _page(_snapshot(_waiting("b/w", "spread")), "b/w", Policies(BINPACK))
    assert 'class="could-go"' not in page
    assert "policy &#x27;spread&#x27; is not allowed for pods" in page
    assert "--allow-pod-policy" in page


def test_a_gang_is_planned_with_the_default_policy_whatever_its_members_name() -> None:
    """The extender holds a gang's plan made with its default policy (`held_place`)."""
    page = _page(
        _snapshot(_waiting("b/w", "spread", gang=True)), "b/w", Policies(BINPACK, (SPREAD,))
    )
    assert _gpu(page).startswith("GPU 0") and "(policy binpack," in page


def test_serve_takes_the_extenders_policy_flags_and_refuses_an_unknown_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = configure(argparse.ArgumentParser())
    args = parser.parse_args(["--serve", "--policy", "binpack", "--allow-pod-policy", "spread"])
    assert (args.policy, args.allow_pod_policy) == (BINPACK, [SPREAD])
    with pytest.raises(SystemExit):
        parser.parse_args(["--serve", "--policy", "tightest"])
    assert "argument --policy: unknown policy 'tightest'" in capsys.readouterr().err
