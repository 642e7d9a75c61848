"""Assignors by protocol name, built-in and installed plugins.

Third-party assignors plug in through the entry-point group ``ktk.assignors``: the entry point's
name is the protocol name and its object is either an assignor instance or a zero-argument
callable returning one. Nothing else is loaded: a plugin runs only if the user installed it.

>>> get("range").name
'range'

Options (a request's ``options`` object) are keyword arguments of the assignor's factory; a name
the factory does not take is an error naming the field:

>>> get("load-aware", {"tolerance": 0.1}).tolerance
0.1
>>> get("range", {"tolerance": 0.1})
Traceback (most recent call last):
...
assignors.errors.InputError: options.tolerance: assignor range takes no option tolerance
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points

from assignors.base import Assignor
from assignors.errors import InputError, UnknownAssignorError

ENTRY_POINT_GROUP = "ktk.assignors"
log = logging.getLogger(__name__)

# protocol name -> "module:attribute" of a zero-argument factory; imported on first use
_BUILTIN: dict[str, str] = {
    "range": "assignors.range:RangeAssignor",
    "roundrobin": "assignors.round_robin:RoundRobinAssignor",
    "sticky": "assignors.sticky:StickyAssignor",
    "cooperative-sticky": "assignors.cooperative_sticky:CooperativeStickyAssignor",
    "uniform": "assignors.uniform:UniformAssignor",
    "server-range": "assignors.server_range:ServerRangeAssignor",
    "optimal": "assignors.optimal:OptimalAssignor",
    "load-aware": "assignors.load_aware:LoadAwareAssignor",
    "load-aware-cooperative": "assignors.load_aware:CooperativeLoadAwareAssignor",
}


def _load(target: str, name: str, options: Mapping[str, object]) -> Assignor:
    module_name, _, attribute = target.partition(":")
    factory: Callable[..., Assignor] = getattr(importlib.import_module(module_name), attribute)
    return _with_options(factory, name, options)


def _with_options(
    factory: Callable[..., Assignor], name: str, options: Mapping[str, object]
) -> Assignor:
    """``factory(**options)`` once every option is a keyword the factory takes."""
    if options:
        parameters = inspect.signature(factory).parameters
        taken = [
            key
            for key, parameter in parameters.items()
            if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        ]
        for key in options:
            if key not in taken:
                known = f"; it takes: {', '.join(taken)}" if taken else ""
                raise InputError(
                    f"assignor {name} takes no option {key}{known}", field=f"options.{key}"
                )
    return factory(**options)


def _plugins() -> dict[str, object]:
    return {point.name: point for point in entry_points(group=ENTRY_POINT_GROUP)}


def builtin_names() -> tuple[str, ...]:
    return tuple(_BUILTIN)


def names() -> tuple[str, ...]:
    """Built-in names first (in their documented order), then installed plugins, sorted."""
    plugins = sorted(name for name in _plugins() if name not in _BUILTIN)
    return (*_BUILTIN, *plugins)


def get(name: str, options: Mapping[str, object] | None = None) -> Assignor:
    """The assignor registered under ``name``, built with ``options`` (keyword arguments of its
    factory); raises UnknownAssignorError naming the choices, InputError for a bad option."""
    options = options or {}
    if name in _BUILTIN:
        return _load(_BUILTIN[name], name, options)
    point = _plugins().get(name)
    if point is None:
        raise UnknownAssignorError(
            f"unknown assignor; known: {', '.join(names())}", field="assignor", value=name
        )
    loaded = point.load()  # type: ignore[attr-defined]
    # an entry point may name a class, a factory function or a ready instance
    is_factory = isinstance(loaded, type) or (callable(loaded) and not isinstance(loaded, Assignor))
    if not is_factory and options:
        raise InputError(
            f"assignor {name} takes no options", field=f"options.{next(iter(options))}"
        )
    assignor = _with_options(loaded, name, options) if is_factory else loaded
    if not isinstance(assignor, Assignor):
        raise UnknownAssignorError(
            f"entry point {ENTRY_POINT_GROUP}:{name} is not an assignor",
            field="assignor",
            value=name,
        )
    log.debug("loaded assignor plugin %s from %s", name, point.value)  # type: ignore[attr-defined]
    return assignor
