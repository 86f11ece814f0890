"""The extender's state is one object that owns its lock and its gangs: `ClusterCache` has no
public field, and no module, its own parts included (node table, pod book, bind holds, gang
coordinator), reaches into a private field of a cache."""

from __future__ import annotations

import ast
from pathlib import Path

import vgpu
from vgpu.extender.cache.cluster import ClusterCache


def test_the_cache_and_its_gang_coordinator_have_no_public_fields() -> None:
    cache = ClusterCache(key=b"k", memory_unit_mib=256)
    assert [name for name in vars(cache) if not name.startswith("_")] == []
    assert [name for name in vars(cache.gangs) if not name.startswith("_")] == []


def _private(obj: object) -> set[str]:
    """The private names of `obj`: its fields and its class's single-underscore attributes."""
    names = set(vars(obj)) | set(dir(type(obj)))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


CACHE = ClusterCache(key=b"k", memory_unit_mib=256)
FIELDS = _private(CACHE) | _private(CACHE.gangs)
"""Every private name of the cache and of its gang coordinator."""


def _reaches_in(source: str, where: str) -> list[str]:
    """The reaches into a cache in a module's `source`: `<anything but self>._name` where
    `_name` is one of the cache's or its coordinator's private names (`c._parts`,
    `self._cache._lock`), and `<something named ...cache>._name` for any private name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__"):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        its_own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
        if (node.attr in FIELDS and not its_own) or name.endswith("cache"):
            found.append((node.lineno, f"{where}:{node.lineno} {ast.unparse(node)}"))
    return [hit for _, hit in sorted(found)]


def test_a_reach_is_found_whatever_the_cache_is_called() -> None:
    source = (
        "def f(c, holder):\n"
        "    c._parts.book\n"
        "    holder.cache._lock\n"
        "    self._cache._gangs\n"
        "    self._lock  # a module's own field\n"
        "    other._private_thing  # not one of the cache's names\n"
    )
    assert _reaches_in(source, "m.py") == [
        "m.py:2 c._parts",
        "m.py:3 holder.cache._lock",
        "m.py:4 self._cache._gangs",
    ]


def test_no_other_module_reaches_into_the_cache() -> None:
    root = Path(vgpu.__file__).parent
    modules = [p for p in root.rglob("*.py") if p != root / "extender" / "cache" / "cluster.py"]
    assert len(modules) > 100 and {"_lock", "_parts", "_gangs"} <= FIELDS
    hits = [hit for p in modules for hit in _reaches_in(p.read_text(), str(p.relative_to(root)))]
    assert hits == []
