"""The extender's state is one object that owns its lock and its gangs: `ClusterCache` has no
public field, and no module, its own parts included (node table, pod book, bind holds, gang
coordinator), reaches into a private field of a cache."""

from __future__ import annotations

import ast
from pathlib import Path

import vgpu
from vgpu.extender.cache import ClusterCache


def test_the_cache_and_its_gang_coordinator_have_no_public_fields() -> None:
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    assert [name for name in vars(cache) if not name.startswith("_")] == []
    assert [name for name in vars(cache.gangs) if not name.startswith("_")] == []


def _reaches_in(path: Path) -> list[str]:
    """`<something named ...cache>._field` in a module: a reach into the cache's fields."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name.endswith("cache") and not node.attr.startswith("__"):
            found.append(f"{path.name}:{node.lineno} {name}.{node.attr}")
    return found


def test_no_other_module_reaches_into_the_cache() -> None:
    root = Path(vgpu.__file__).parent
    modules = list(root.rglob("*.py"))
    assert modules
    assert [hit for p in modules for hit in _reaches_in(p)] == []
