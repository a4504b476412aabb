"""The alpha-beta link model: exact recovery from synthetic timings, the ring formula, and slow links and nodes
named from a matrix of fits (ML-NET-009..011)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorlab.diagnostics.link_model import (LinkFit, fit_link, predict_ring, ring_allreduce_seconds, ring_links,
                                              slow_links, slow_nodes)
from mirrorlab.diagnostics.link_report import fit_links, link_findings

TASKS = ["worker:0", "worker:1", "worker:2"]
FAST = LinkFit(alpha_s=100e-6, beta_s=1e-9)  # 100 µs, 1 GB/s


def _mesh(**overrides: LinkFit) -> dict[tuple[str, str], LinkFit]:
    fits = {(a, b): FAST for a in TASKS for b in TASKS if a != b}
    for key, fit in overrides.items():
        a, b = key.split("_to_")
        fits[(f"worker:{a}", f"worker:{b}")] = fit
    return fits


@given(alpha=st.floats(1e-6, 1.0), beta=st.floats(1e-12, 1e-6),
       sizes=st.lists(st.integers(1, 1 << 24), min_size=2, max_size=20, unique=True))
def test_the_fit_recovers_alpha_and_beta_exactly_from_noiseless_timings(alpha: float, beta: float,
                                                                        sizes: list[int]) -> None:
    fit = fit_link([(s, alpha + s * beta) for s in sizes])
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6, abs=1e-12 + 1e-9 * max(sizes) * beta)
    assert fit.beta_s == pytest.approx(beta, rel=1e-6)


def test_a_fit_needs_two_sizes() -> None:
    with pytest.raises(ValueError, match="two message sizes"):
        fit_link([(64, 0.001), (64, 0.002)])
    assert fit_links({("worker:0", "worker:1"): [(64, 0.001)]}) == {}


def test_the_ring_formula() -> None:
    # n=4, S=100 MB, alpha=1 ms, 1 GB/s: 6 * 1 ms + 1.5 * 0.1 s = 0.156 s
    assert ring_allreduce_seconds(4, 100e6, 1e-3, 1e-9) == pytest.approx(0.156)
    assert ring_allreduce_seconds(1, 100e6, 1e-3, 1e-9) == 0.0
    assert ring_links(TASKS) == [("worker:0", "worker:1"), ("worker:1", "worker:2"), ("worker:2", "worker:0")]


def test_the_prediction_uses_the_slowest_ring_link_and_says_what_is_missing() -> None:
    slow = LinkFit(alpha_s=10e-3, beta_s=1e-8)
    seconds, bottleneck, missing = predict_ring(_mesh(**{"1_to_2": slow}), TASKS, 1e6)
    assert bottleneck == ("worker:1", "worker:2") and missing == []
    assert seconds == pytest.approx(ring_allreduce_seconds(3, 1e6, 10e-3, 1e-8))
    seconds, bottleneck, missing = predict_ring({("worker:0", "worker:1"): FAST}, TASKS, 1e6)
    assert missing == [("worker:1", "worker:2"), ("worker:2", "worker:0")]
    assert math.isnan(predict_ring({}, TASKS, 1e6)[0])


def test_one_slow_link_is_named_and_no_node_is_blamed() -> None:
    fits = _mesh(**{"0_to_2": LinkFit(50e-3, 1e-9), "2_to_0": LinkFit(50e-3, 1e-9)})
    assert set(slow_links(fits)) == {("worker:0", "worker:2"), ("worker:2", "worker:0")}
    assert slow_nodes(fits) == []
    findings = link_findings(fits, TASKS, 1 << 20)
    assert [f.workers for f in findings if f.code == "ML-NET-009"] == [("worker:0", "worker:2"),
                                                                      ("worker:2", "worker:0")]
    assert "latency 50.00 ms" in findings[0].message


def test_a_slow_node_is_named_instead_of_its_links() -> None:
    slow = LinkFit(1e-4, 1e-7)  # 10 MB/s
    fits = _mesh(**{"0_to_2": slow, "2_to_0": slow, "1_to_2": slow, "2_to_1": slow})
    assert slow_nodes(fits) == ["worker:2"]
    codes = [(f.code, f.workers) for f in link_findings(fits, TASKS, None)]
    assert ("ML-NET-010", ("worker:2",)) in codes and not [c for c, _ in codes if c == "ML-NET-009"]


def test_an_even_mesh_names_nothing_slow_and_predicts_with_units() -> None:
    findings = link_findings(_mesh(), TASKS, 100_000_000)
    assert [f.code for f in findings] == ["ML-NET-011"]
    # 4 * 100 µs + 4/3 * 100 MB / (1 GB/s)
    assert "predicted at 133.73 ms" in findings[0].message and "bandwidth 1.00 GB/s" in findings[0].evidence
    assert link_findings({}, TASKS, None) == []
