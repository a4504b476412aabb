"""Each simulated worker's own process-wide random generators, as separate worker processes have them.

Python's ``random`` module and NumPy's legacy ``np.random`` functions keep one hidden state per process. Real
workers are separate processes, so ``np.random.seed(42)`` in every worker gives every worker the same numbers (and
Keras draws its default initializer seeds from ``random``). Simulated workers share one process, so each worker
gets its own ``random.Random`` and ``np.random.RandomState``. During a run the modules' generator functions
(``random.random``, ``np.random.rand``, ``numpy.random.mtrand.rand``, ...) are taken out of the modules and looked
up through each module's ``__getattr__``, which hands out the live worker's bound method; a switch to another
worker only rebinds the two generators the modules' own code reads (``random._inst``, ``mtrand._rand``, which
``np.random.seed`` and ``get_state`` use): two dictionary writes, where rebinding every function cost 3-6 us a
switch and copying generator states about 100 us. A worker's generators start from its index, not from the
scheduling seed, so a program computes the same under every interleaving; the caller's own generators are never
touched and are bound back when the run ends.

Limitations: a function bound before the run (``from random import shuffle`` at import time) keeps drawing from
the caller's generator, not the worker's; look the function up on the module (``random.shuffle``) instead. During
a run the generator functions are not in the modules' ``__dict__`` (nor ``dir()``); attribute access finds them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any

import numpy as np
import numpy.random.mtrand as mtrand

__all__ = ["ProcessRandomStates"]

_PYTHON, _NUMPY = 0, 1
_MODULES: tuple[ModuleType, ...] = (random, np.random, mtrand)
"""The modules whose functions are bound to a process-wide generator (``np.random``'s are ``mtrand``'s)."""
_HOLDERS: tuple[tuple[ModuleType, str, int], ...] = ((random, "_inst", _PYTHON), (mtrand, "_rand", _NUMPY))
"""The names that hold the generators, read by the modules' own code (``np.random.seed`` reads ``mtrand._rand``)."""


def _fresh(worker: int) -> tuple[random.Random, np.random.RandomState]:
    """The generators a new worker process would start with, reproducible from the worker's index."""
    python, numpy = (np.random.SeedSequence([worker, 0x5EED, which]).generate_state(4) for which in range(2))
    return random.Random(int.from_bytes(python.tobytes(), "little")), np.random.RandomState(numpy)


def _generator_functions(module: ModuleType, host: tuple[random.Random, np.random.RandomState]
                         ) -> dict[str, tuple[int, str]]:
    """The module's names bound to a method of one of the host's generators: name -> (which generator, method);
    inside another run (a simulation in a simulated worker), that run's table."""
    outer = getattr(vars(module).get("__getattr__"), "functions", None)
    if outer is not None:
        return outer
    which = {id(generator): k for k, generator in enumerate(host)}
    return {name: (which[id(value.__self__)], value.__name__) for name, value in vars(module).items()
            if id(getattr(value, "__self__", None)) in which and callable(value)}


class ProcessRandomStates:
    """Holds every simulated worker's ``random`` and ``np.random`` generators; ``switch(w)`` makes ``w``'s live.

    While entered, the modules' generator functions resolve to the live worker's generators (before the first
    switch: the caller's)."""

    def __init__(self, workers: int) -> None:
        self._host = (random._inst, mtrand._rand)
        self._workers = [_fresh(w) for w in range(workers)]
        self._functions = [(module, _generator_functions(module, self._host)) for module in _MODULES]
        self._previous: list[Any] = []  # each module's __getattr__ before the run (another run's, or none)
        self._holders = [(vars(module), holder, k) for module, holder, k in _HOLDERS]
        self._live = self._host
        self._live_worker: int | None = None

    def __enter__(self) -> "ProcessRandomStates":
        self._previous = []
        for module, functions in self._functions:
            namespace = vars(module)
            self._previous.append(namespace.get("__getattr__"))
            for name in functions:
                namespace.pop(name, None)
            namespace["__getattr__"] = self._lookup(module, functions, self._previous[-1])
        return self

    def _lookup(self, module: ModuleType, functions: dict[str, tuple[int, str]],
                previous: Callable[[str], Any] | None) -> Callable[[str], Any]:
        """The module's ``__getattr__`` while entered: a generator function of the live worker, else what the
        module's own ``__getattr__`` (if any) gives."""

        def __getattr__(name: str) -> Any:  # noqa: N807 (a module's __getattr__)
            entry = functions.get(name)
            if entry is not None:
                return getattr(self._live[entry[0]], entry[1])
            if previous is not None:
                return previous(name)
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

        __getattr__.functions = functions  # type: ignore[attr-defined]  (for a run inside a simulated worker)
        return __getattr__

    def switch(self, worker: int) -> None:
        """Make ``worker``'s generators the live ones (nothing to do if they already are)."""
        if worker == self._live_worker:
            return
        self._bind(self._workers[worker])
        self._live_worker = worker

    def _bind(self, generators: tuple[random.Random, np.random.RandomState]) -> None:
        self._live = generators
        for namespace, holder, k in self._holders:
            namespace[holder] = generators[k]

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._bind(self._host)
        self._live_worker = None
        for (module, functions), previous in zip(self._functions, self._previous):
            namespace = vars(module)
            if previous is None:
                del namespace["__getattr__"]
            else:
                namespace["__getattr__"] = previous
            if getattr(previous, "functions", None) is None:  # not inside another run: the functions go back
                namespace.update({name: getattr(self._host[k], method) for name, (k, method) in functions.items()})
