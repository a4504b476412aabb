"""The pytest plugin (registered by the ``pytest11`` entry point): a ``sim_cluster`` fixture, a
``cluster_shapes`` marker that runs a test once per named shape, and a "mirrorlab replay" section on every
failing test that ran a simulated cluster: its seed, faults and the line that runs it again."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from mirrorlab._version import __version__
from mirrorlab.sim import Fault, RunResult

from .combinations import ALL, ClusterShape, by_name, multi_worker_mirrored_2x1_cpu

__all__ = ["SimClusters"]

MARKER = "cluster_shapes"


class SimClusters:
    """What ``sim_cluster`` gives a test: ``run(program, *args, seed=, faults=, shape=)`` on a simulated cluster
    (of the test's ``cluster_shape`` unless ``shape`` says otherwise), remembering each run's replay line."""

    def __init__(self, shape: ClusterShape) -> None:
        self.shape = shape
        self.replays: list[str] = []

    def run(self, program: Callable[..., Any], *args: Any, seed: int = 0, faults: Sequence[Fault] = (),
            shape: ClusterShape | None = None, **kwargs: Any) -> RunResult:
        result = (shape or self.shape).cluster(seed, faults).run(program, *args, **kwargs)
        self.replays.append(f"seed={result.seed} faults={list(result.config.faults)!r}: {result.replay}")
        return result


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(*names): run the test once per named simulated cluster shape "
                                       f"(all of {', '.join(ALL)} when none are named)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or not {"cluster_shape", "sim_cluster"} & set(metafunc.fixturenames):
        return
    if "cluster_shape" not in metafunc.fixturenames:  # a test that takes only sim_cluster runs once per shape too
        metafunc.fixturenames.append("cluster_shape")
    shapes = [by_name(name) if isinstance(name, str) else name for name in marker.args] or list(ALL.values())
    metafunc.parametrize("cluster_shape", shapes, ids=[shape.name for shape in shapes], indirect=True)


@pytest.fixture
def cluster_shape(request: pytest.FixtureRequest) -> ClusterShape:
    """The simulated cluster's shape: the ``cluster_shapes`` marker's current one, else a chief plus one worker."""
    return getattr(request, "param", multi_worker_mirrored_2x1_cpu)


@pytest.fixture(scope="session")
def sim_cluster() -> SimClusters:
    """Runs programs on simulated clusters of the test's shape; a failing test reports the last run's seed, faults
    and replay line. Session-scoped (reset before each test), so Hypothesis tests may take it as an argument."""
    return SimClusters(multi_worker_mirrored_2x1_cpu)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Points ``sim_cluster`` at a test that uses it: its shape, a fresh list of replay lines, and the report hook
    (tests that do not use it are left alone)."""
    funcargs = getattr(item, "funcargs", {})
    clusters = funcargs.get("sim_cluster")
    if not isinstance(clusters, SimClusters):
        return
    clusters.shape = funcargs.get("cluster_shape", multi_worker_mirrored_2x1_cpu)
    clusters.replays = []
    item.mirrorlab_clusters = clusters


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    clusters = getattr(item, "mirrorlab_clusters", None)
    if report.when == "call" and report.failed and clusters is not None and clusters.replays:
        lines = [f"mirrorlab {__version__}; the last simulated run (under Hypothesis: the failing example's):",
                 f"replay: {clusters.replays[-1]}"]
        report.sections.append(("mirrorlab replay", "\n".join(lines)))
