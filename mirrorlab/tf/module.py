"""``tf.Module``: a named container whose variables and submodules are found by walking its attributes.

The walk is TF 2.21's: attributes in sorted name order (nests flattened as ``tf.nest`` does, dicts by sorted key),
each object once, a module's own variables before those of its submodules, which are walked in the order found.
Checkpoints track every attribute that holds state, private ones included (TF's AutoTrackable).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

from .. import nest
from ..distribute.variables import Variable
from .name_scope import name_scope

__all__ = ["Module"]


def _camel_to_snake(name: str) -> str:
    """TF's default module name: ``MyDense`` is ``my_dense``, ``MLP`` is ``mlp``."""
    return re.sub(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))", r"_\1", name).lower()


class Module:
    """Base class for models and layers built from variables (``tf.Module``)."""

    def __init__(self, name: str | None = None) -> None:
        if name is None:
            name = _camel_to_snake(type(self).__name__)
        elif not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid Python identifiers "
                             "(e.g. a valid class name).")
        self._name = name
        with name_scope(name) as scope:  # inside the scope open now, as TF's
            self._name_scope = name_scope(scope)

    @property
    def name(self) -> str:
        """The module's name (its class name in snake case unless given)."""
        return self._name

    @property
    def name_scope(self) -> name_scope:
        """The module's scope (``with self.name_scope:`` names variables ``module/...``)."""
        return self._name_scope

    @classmethod
    def with_name_scope(cls, method: Callable[..., Any]) -> Callable[..., Any]:
        """Decorate a method to run inside its module's ``name_scope`` (TF's ``Module.with_name_scope``)."""
        @functools.wraps(method)
        def in_scope(self: Module, *args: Any, **kwargs: Any) -> Any:
            with self.name_scope:
                return method(self, *args, **kwargs)
        return in_scope

    @property
    def variables(self) -> tuple[Variable, ...]:
        """Every variable of this module and its submodules, in TF's order."""
        return tuple(_walk(self, lambda value: isinstance(value, Variable)))

    @property
    def trainable_variables(self) -> tuple[Variable, ...]:
        """The trainable ones among ``variables``."""
        return tuple(_walk(self, lambda value: isinstance(value, Variable) and value.trainable))

    @property
    def non_trainable_variables(self) -> tuple[Variable, ...]:
        """The other ones among ``variables``."""
        return tuple(_walk(self, lambda value: isinstance(value, Variable) and not value.trainable))

    @property
    def submodules(self) -> tuple[Module, ...]:
        """Every module below this one (not itself), each once."""
        return tuple(_walk(self, lambda value: isinstance(value, Module)))

    def _checkpoint_children(self) -> dict[str, Any]:
        """Every attribute, in the order it was set (values holding no state are left out by the walk)."""
        return dict(vars(self))


def _walk(module: Module, predicate: Callable[[Any], bool], seen: set[int] | None = None) -> Iterator[Any]:
    """The values below ``module`` that ``predicate`` accepts: its own attributes first (sorted by name, each object
    once across the whole walk, so cycles end), then each submodule found there, recursively."""
    seen = {id(module)} if seen is None else seen
    submodules = []
    for key in sorted(vars(module)):
        for leaf in nest.flatten(vars(module)[key]):
            if id(leaf) in seen:
                continue
            seen.add(id(leaf))
            if predicate(leaf):
                yield leaf
            if isinstance(leaf, Module):
                submodules.append(leaf)
    for submodule in submodules:
        yield from _walk(submodule, predicate, seen)
