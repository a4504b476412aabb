"""The simulator gives each worker its own ``random`` / ``np.random`` generators by rebinding the modules'
functions at each switch (sim/process_random.py); these tests pin what that rebinding must cover."""

from __future__ import annotations

import random

import numpy as np
import numpy.random.mtrand as mtrand

from mirrorlab.sim import SimCluster


def _draws() -> tuple:
    """Seed through one name and draw through the others: all must reach the same worker generator."""
    np.random.seed(3)
    random.seed(3)
    state = np.random.get_state()[1][:2].tolist()
    return (np.random.rand(), mtrand.rand(), np.random.mtrand._rand.rand(), np.random.random_sample(),
            random.random(), random._inst.random(), state)


def test_every_module_name_reaches_the_worker_generator() -> None:
    np.random.seed(3)
    random.seed(3)
    expected = _draws()
    values = SimCluster(4, seed=9).run(_draws).values()
    assert values == [expected] * 4


def test_the_callers_generators_are_bound_back_after_the_run() -> None:
    before = (random._inst, mtrand._rand, random.random, np.random.rand, mtrand.rand)
    random.seed(11)
    np.random.seed(11)
    expected = (random.random(), np.random.rand())
    random.seed(11)
    np.random.seed(11)
    SimCluster(3, seed=2).run(lambda: (random.random(), np.random.rand(), np.random.seed(0)))
    assert (random._inst, mtrand._rand) == before[:2]
    assert (random.random, np.random.rand, mtrand.rand) == before[2:]
    assert (random.random(), np.random.rand()) == expected
