"""Each simulated worker's own process-wide random generators, as separate worker processes have them.

Python's ``random`` module and NumPy's legacy ``np.random`` functions keep one hidden state per process. Real
workers are separate processes, so ``np.random.seed(42)`` in every worker gives every worker the same numbers (and
Keras draws its default initializer seeds from ``random``). Simulated workers share one process, so each worker
gets its own ``random.Random`` and ``np.random.RandomState``, and a switch to another worker rebinds the modules'
functions (``random.random``, ``np.random.rand``, ...) to that worker's generators: a few dictionary updates
instead of copying two generator states (about 100 us) at every switch. A worker's generators start from its
index, not from the scheduling seed, so a program computes the same under every interleaving; the caller's own
generators are never touched and are bound back when the run ends.

Limitation: a function bound before the run (``from random import shuffle`` at import time) keeps drawing from
the caller's generator, not the worker's; look the function up on the module (``random.shuffle``) instead.
"""

from __future__ import annotations

import random
from types import ModuleType, TracebackType
from typing import Any

import numpy as np
import numpy.random.mtrand as mtrand

__all__ = ["ProcessRandomStates"]

# The modules whose functions are bound to a process-wide generator, and the name that holds the generator.
_SINGLETONS: tuple[tuple[ModuleType, str], ...] = ((random, "_inst"), (np.random, "mtrand"), (mtrand, "_rand"))


def _fresh(worker: int) -> tuple[random.Random, np.random.RandomState]:
    """The generators a new worker process would start with, reproducible from the worker's index."""
    python, numpy = (np.random.SeedSequence([worker, 0x5EED, which]).generate_state(4) for which in range(2))
    return random.Random(int.from_bytes(python.tobytes(), "little")), np.random.RandomState(numpy)


def _bindings(python: random.Random, numpy: np.random.RandomState) -> list[tuple[dict, dict[str, Any]]]:
    """For each module: its dictionary and the entries that make ``python`` / ``numpy`` its generators."""
    generators = {id(random._inst): python, id(mtrand._rand): numpy}
    out = []
    for module, holder in _SINGLETONS:
        entries = {name: getattr(generators[id(value.__self__)], value.__name__)
                   for name, value in vars(module).items()
                   if id(getattr(value, "__self__", None)) in generators and callable(value)}
        if holder == "_inst":
            entries[holder] = python
        elif holder == "_rand":
            entries[holder] = numpy
        out.append((vars(module), entries))
    return out


class ProcessRandomStates:
    """Holds every simulated worker's ``random`` and ``np.random`` generators; ``switch(w)`` makes ``w``'s live."""

    def __init__(self, workers: int) -> None:
        self._host = _bindings(random._inst, mtrand._rand)
        self._workers = [_bindings(*_fresh(w)) for w in range(workers)]
        self._live: int | None = None

    def __enter__(self) -> "ProcessRandomStates":
        return self

    def switch(self, worker: int) -> None:
        """Bind the modules' random functions to ``worker``'s generators (nothing to do if they already are)."""
        if worker == self._live:
            return
        for namespace, entries in self._workers[worker]:
            namespace.update(entries)
        self._live = worker

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        for namespace, entries in self._host:
            namespace.update(entries)
        self._live = None
