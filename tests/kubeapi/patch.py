"""The three patch formats the fake API server accepts.

- JSON merge patch (RFC 7386): maps merge, `null` deletes a key, lists are replaced.
- Strategic merge patch: the merge patch, except that a few well-known lists are merged by
  their key field (conditions by `type`, containers by `name`, ...) and `$patch: delete`
  removes a list element. Other `$` directives are dropped. Enough for labels, annotations,
  status conditions and containers; not the full upstream algorithm.
- JSON patch (RFC 6902): add, remove, replace, move, copy, test.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.kubeapi.resources import ApiError

# Lists that strategic merge patch merges by a key instead of replacing (field name → key).
_MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "addresses": "type",
    "ports": "containerPort",
}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    if isinstance(patch, list) and isinstance(target, list) and field in _MERGE_KEYS:
        return _merge_list(target, patch, _MERGE_KEYS[field])
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value, key)
    return result


def _merge_list(target: list[Any], patch: list[Any], key: str) -> list[Any]:
    result = [copy.deepcopy(item) for item in target]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise ApiError(400, f"strategic merge patch: list item lacks merge key {key!r}")
        index = next((i for i, cur in enumerate(result) if cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"json patch: invalid path {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise ApiError(422, f"json patch: path segment {part!r} does not exist") from e
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts), parts[-1]
    try:
        return parent[int(last)] if isinstance(parent, list) else parent[last]
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ApiError(422, f"json patch: path {path!r} does not exist") from e


def _add(doc: Any, path: str, value: Any) -> None:
    parts = _pointer(path)
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if not 0 <= index <= len(parent):
            raise ApiError(422, f"json patch: index out of range in {path!r}")
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise ApiError(422, f"json patch: cannot add at {path!r}")


def _remove(doc: Any, path: str) -> Any:
    value = _get(doc, path)
    parts = _pointer(path)
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        del parent[int(last)]
    else:
        del parent[last]
    return value


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise ApiError(400, "json patch body must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _remove(doc, path)
            _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            _add(doc, path, _remove(doc, op.get("from", "")))
        elif kind == "copy":
            _add(doc, path, copy.deepcopy(_get(doc, op.get("from", ""))))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, f"json patch: test operation failed at {path!r}")
        else:
            raise ApiError(400, f"json patch: unknown operation {kind!r}")
    return doc
