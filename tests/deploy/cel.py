"""An admission policy's CEL evaluated as the API server runs it (cel-python): its variables in
order, each seeing those before it, then the messages of the validations the object fails."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import pytest

celpy = pytest.importorskip("celpy")
from celpy import celtypes  # noqa: E402

Obj = dict[str, Any]
ENV = celpy.Environment()


def _join(items: Any, sep: Any = "") -> Any:
    """Kubernetes' CEL strings library `join` (k8s.io/apiserver cel library), as documented."""
    return celtypes.StringType(str(sep).join(str(x) for x in items))


KUBE_STRINGS: Obj = {"join": _join}
"""The parts of Kubernetes' CEL strings library the chart's policies use."""


@functools.cache
def _compiled(expression: str) -> Any:
    return ENV.compile(expression)


def run(expression: str, activation: Mapping[str, Any], functions: Obj | None = None) -> Any:
    """One expression's value in `activation` (`functions`: Kubernetes' CEL library, where a
    test gives the parts it needs)."""
    return ENV.program(_compiled(expression), functions=functions).evaluate(dict(activation))


def activation(
    spec: Obj, base: Obj, functions: Obj | None = None, preset: Obj | None = None
) -> Obj:
    """`base` with the policy's variables, evaluated in order; `preset` gives some variables'
    values instead (expressions cel-python cannot parse, such as optional fields)."""
    variables: Obj = dict(preset or {})

    def now() -> Obj:
        names = {celtypes.StringType(k): v for k, v in variables.items()}
        return {**base, "variables": celtypes.MapType(names)}

    for v in spec.get("variables", []):
        if v["name"] not in variables:
            variables[v["name"]] = run(v["expression"], now(), functions)
    return now()


def refusals(
    spec: Obj,
    base: Obj,
    *,
    functions: Obj | None = None,
    preset: Obj | None = None,
    only: Callable[[Obj], bool] = lambda _: True,
) -> list[str]:
    """The messages of the validations (those `only` keeps) that `base`'s object fails."""
    context = activation(spec, base, functions, preset)
    return [
        str(run(v["messageExpression"], context, functions))
        for v in spec["validations"]
        if only(v) and not run(v["expression"], context, functions)
    ]


def cel(value: Any) -> Any:
    """A JSON value as CEL sees it."""
    return celpy.json_to_cel(value)
