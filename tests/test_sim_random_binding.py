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


def test_generator_functions_resolve_through_the_modules_during_a_run_and_are_put_back() -> None:
    names = ("rand", "seed", "shuffle")
    before = {name: vars(np.random).get(name) for name in names}

    def program() -> tuple:
        from numpy.random import rand  # a lookup inside the worker finds the worker's generator
        np.random.seed(5)
        first = rand()
        np.random.seed(5)
        try:
            np.random.no_such_function  # noqa: B018 (the attribute error itself is what is checked)
        except AttributeError as exc:
            missing = str(exc)
        return first, np.random.rand(), missing

    values = SimCluster(2, seed=1).run(program).values()
    np.random.seed(5)
    assert values == [(np.random.rand(), values[0][1], "module 'numpy.random' has no attribute 'no_such_function'")] * 2
    assert values[0][0] == values[0][1]
    assert {name: vars(np.random).get(name) for name in names} == before
    assert "__getattr__" not in vars(np.random) and "__getattr__" not in vars(random)


def test_a_simulation_inside_a_simulated_worker_keeps_each_workers_generators() -> None:
    def inner() -> float:
        return random.random()

    def outer() -> tuple:
        random.seed(7)
        inner_values = SimCluster(2, seed=3).run(inner).values()
        return inner_values, random.random()

    random.seed(7)
    after_seed = random.random()
    inner_alone = SimCluster(2, seed=3).run(inner).values()
    values = SimCluster(2, seed=4).run(outer).values()
    assert values == [(inner_alone, after_seed)] * 2  # the outer worker's generator survives the inner run
    assert "__getattr__" not in vars(random) and random.random == random._inst.random
