"""The extender's log explains a decision: the GPUs a bind chose, and at -v (debug) the nodes
that scored best in filter (on call, the log once said only "bound p to n1")."""

from __future__ import annotations

import logging
import re

import pytest

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness


def test_a_bind_logs_the_chosen_gpus(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    harness.put(make_node("n1", gpus=2))
    harness.put(make_pod("p", cores=30))
    daemon = harness.start()
    caplog.set_level(logging.INFO, logger="vgpu.extender.binder")
    assert harness.wire(daemon).bind(harness.pod("p"), "n1") == ""
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("bound ")]
    assert re.fullmatch(r"bound default/p to n1: main on \S+ 30 cores \d+ MiB", line), line


def test_filter_logs_the_top_scores_at_debug_only(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("n1", "n2", "n3"):
        harness.put(make_node(name, gpus=2))
    harness.put(make_pod("p", cores=30))
    daemon = harness.start()
    wire = harness.wire(daemon)
    caplog.set_level(logging.INFO, logger="vgpu.extender.service")
    wire.filter(harness.pod("p"), ["n1", "n2", "n3"])
    assert not [r for r in caplog.records if "top scores" in r.getMessage()]
    caplog.set_level(logging.DEBUG, logger="vgpu.extender.service")
    harness.put(make_pod("q", cores=40))
    wire.filter(harness.pod("q"), ["n1", "n2", "n3"])
    (line,) = [r.getMessage() for r in caplog.records if "top scores" in r.getMessage()]
    assert re.match(r"filter default/q: 3 nodes fit, top scores \(\w+\): n\d=\S+, n\d=", line)
