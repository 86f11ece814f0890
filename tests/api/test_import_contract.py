"""The import contract (`.importlinter`) names whole packages, and every package is under one.

`lint-imports` checks that the code keeps the contracts; these tests check that the contracts
themselves keep covering the house: a new pure module is covered because its package is, and a
new package that no contract names fails here instead of going unchecked.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PURE = ("vgpu.core", "vgpu.api", "vgpu.sim", "vgpu.node", "vgpu.dra")
"""The pure packages; that they also hold no file I/O is `test_pure_file_io.py`'s to check."""


def _config() -> dict[str, configparser.SectionProxy]:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    return {
        name.removeprefix("importlinter:contract:"): config[name]
        for name in config.sections()
        if name.startswith("importlinter:contract:")
    }


def _contracts() -> dict[str, list[str]]:
    """The modules each contract constrains: a forbidden contract's sources, an independence
    contract's modules, a layers contract's containers."""
    keys = ("source_modules", "modules", "containers")
    return {
        name: [module for key in keys for module in section.get(key, "").split()]
        for name, section in _config().items()
    }


def _packages() -> set[str]:
    return {
        f"vgpu.{init.parent.name}"
        for init in (REPO / "vgpu").glob("*/__init__.py")
        if not init.parent.name.startswith("_")
    }


def test_pure_contract_names_packages_not_modules() -> None:
    pure = _contracts()["pure-core"]
    assert set(PURE) <= set(pure)
    assert all(name in _packages() for name in pure), pure


def test_every_package_is_the_source_of_some_contract() -> None:
    covered = {name for sources in _contracts().values() for name in sources}
    assert _packages() - covered <= {"vgpu.daemons", "vgpu.cli"}  # the roots: nothing above them


def test_extender_agent_and_report_are_independent() -> None:
    section = _config()["verbs-are-independent"]
    assert section["type"] == "independence"
    assert set(section["modules"].split()) == {"vgpu.extender", "vgpu.agent", "vgpu.inspect"}


def test_every_extender_module_has_a_layer_below_the_server() -> None:
    """The layers contract is exhaustive, so a new module or package of the extender fails
    `lint-imports` until it is placed; here: the server is the top layer and the table of verbs
    the next, and every module and package (server, cache, gangs, pods, queues) has its place."""
    section = _config()["extender-server-on-top"]
    layers = [line.strip() for line in section["layers"].splitlines() if line.strip()]
    assert (section["exhaustive"], layers[0], layers[1]) == ("true", "server", "routes")
    placed = {name.strip() for layer in layers for name in layer.split(":")}
    extender = REPO / "vgpu/extender"
    modules = {path.stem for path in extender.glob("*.py")} - {"__init__"}
    packages = {init.parent.name for init in extender.glob("*/__init__.py")}
    assert {"server", "cache", "gangs", "pods", "queues"} <= packages
    assert modules | packages == placed


def test_generated_grpc_code_lives_with_the_adapters() -> None:
    assert not list((REPO / "vgpu/api/_proto").glob("*.py"))  # a stale __pycache__ may linger
    assert (REPO / "vgpu/adapters/_proto/__init__.py").is_file()


def _circles() -> list[set[str]]:
    """Strongly connected groups of vgpu modules, type-hint imports included (grimp reads them)."""
    grimp = pytest.importorskip("grimp")  # installed with import-linter (the test extras)
    graph = grimp.build_graph("vgpu")
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = {stack.pop()}
            while module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.append({name.rsplit(".", 1)[1] for name in group})

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return found


def test_no_import_circle() -> None:
    """Not even through type-hint imports (the last ones ran through them: the extender cache
    and its gang coordinators, the node agent and its config)."""
    assert _circles() == []
