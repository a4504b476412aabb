"""The alpha-beta model of a link, fitted from timed transfers, and the ring all-reduce time it predicts.

A message of ``s`` bytes over a link takes ``alpha + s * beta`` seconds (alpha: per-message latency, beta: seconds
per byte, 1/bandwidth). A ring all-reduce of ``S`` bytes over ``n`` workers sends ``2(n-1)`` messages of ``S/n``
bytes one after another on every ring link, so it takes ``T = 2(n-1) alpha + 2(n-1)/n S beta`` with the slowest
ring link's alpha and beta (Thakur, Rabenseifner and Gropp 2005; NCCL's and Horovod's cost model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["LinkFit", "fit_link", "ring_allreduce_seconds", "ring_links", "predict_ring", "slow_links",
           "slow_nodes", "format_seconds", "format_rate"]

Pair = tuple[str, str]

#: A link is slow when its latency is this many times the fastest link's and at least SLOW_MIN_EXTRA_S more,
#: or its bandwidth is below the best link's divided by this factor. (Against the best, not the median: one slow
#: node makes most links of a small mesh slow.)
SLOW_FACTOR = 3.0
SLOW_MIN_EXTRA_S = 0.002


@dataclass(frozen=True)
class LinkFit:
    """One link's fitted latency ``alpha_s`` (seconds per message) and ``beta_s`` (seconds per byte)."""

    alpha_s: float
    beta_s: float

    @property
    def bandwidth(self) -> float:
        """Bytes per second (infinite when no transfer time per byte was measurable)."""
        return float("inf") if self.beta_s <= 0 else 1.0 / self.beta_s


def fit_link(samples: Sequence[tuple[int, float]]) -> LinkFit:
    """Least-squares fit of ``seconds = alpha + bytes * beta`` to ``(bytes, seconds)`` samples of at least two sizes."""
    sizes = np.array([s for s, _ in samples], dtype=np.float64)
    times = np.array([t for _, t in samples], dtype=np.float64)
    if len(set(sizes.tolist())) < 2:
        raise ValueError(f"fitting alpha and beta needs samples of two message sizes or more, got sizes {set(sizes)}")
    design = np.stack([np.ones_like(sizes), sizes], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(design, times, rcond=None)
    return LinkFit(max(0.0, float(alpha)), max(0.0, float(beta)))


def ring_allreduce_seconds(n: int, model_bytes: float, alpha_s: float, beta_s: float) -> float:
    """``T = 2(n-1) alpha + 2(n-1)/n S beta``: a ring all-reduce of ``model_bytes`` over ``n`` workers."""
    if n < 1:
        raise ValueError(f"a ring needs at least one worker, got n={n}")
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * model_bytes * beta_s


def ring_links(tasks: Sequence[str]) -> list[Pair]:
    """The directed links a ring over ``tasks`` (in ring order) uses: each task to the next, the last to the first."""
    return [(tasks[i], tasks[(i + 1) % len(tasks)]) for i in range(len(tasks))] if len(tasks) > 1 else []


def predict_ring(fits: Mapping[Pair, LinkFit], tasks: Sequence[str], model_bytes: float
                 ) -> tuple[float, Pair | None, list[Pair]]:
    """The predicted all-reduce seconds from the measured ring links (the slowest alpha and beta among them), the
    link that bounds it, and the ring links that were not measured."""
    links = ring_links(tasks)
    measured = [link for link in links if link in fits]
    missing = [link for link in links if link not in fits]
    if not measured:
        return float("nan"), None, missing
    alpha = max(fits[link].alpha_s for link in measured)
    beta = max(fits[link].beta_s for link in measured)
    bottleneck = max(measured, key=lambda link: ring_allreduce_seconds(len(tasks), model_bytes, fits[link].alpha_s,
                                                                       fits[link].beta_s))
    return ring_allreduce_seconds(len(tasks), model_bytes, alpha, beta), bottleneck, missing


def slow_links(fits: Mapping[Pair, LinkFit]) -> dict[Pair, str]:
    """The links much slower than the fastest link, each with the reason in words."""
    if len(fits) < 2:
        return {}
    best_alpha = min(f.alpha_s for f in fits.values())
    best_rate = max(f.bandwidth for f in fits.values())
    slow = {}
    for pair, fit in fits.items():
        if fit.alpha_s > SLOW_FACTOR * best_alpha and fit.alpha_s - best_alpha > SLOW_MIN_EXTRA_S:
            slow[pair] = f"latency {format_seconds(fit.alpha_s)} against {format_seconds(best_alpha)} on the best link"
        elif fit.bandwidth < best_rate / SLOW_FACTOR:
            slow[pair] = f"bandwidth {format_rate(fit.bandwidth)} against {format_rate(best_rate)} on the best link"
    return slow


def slow_nodes(fits: Mapping[Pair, LinkFit]) -> list[str]:
    """Tasks every one of whose measured links (two or more) is slow while some other link is not: the node, not a
    link, is the problem."""
    slow = slow_links(fits)
    nodes = sorted({task for pair in fits for task in pair})
    found = []
    for node in nodes:
        own = [pair for pair in fits if node in pair]
        others = [pair for pair in fits if node not in pair]
        if len(own) >= 2 and all(pair in slow for pair in own) and any(pair not in slow for pair in others):
            found.append(node)
    return found


def format_seconds(seconds: float) -> str:
    """Seconds in the unit that reads best: µs, ms or s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    return f"{seconds * 1e3:.2f} ms" if seconds < 1.0 else f"{seconds:.3f} s"


def format_rate(bytes_per_s: float) -> str:
    """Bytes per second in MB/s or GB/s (decimal units, as link speeds are quoted)."""
    if bytes_per_s == float("inf"):
        return "unmeasurably fast"
    megabytes = round(bytes_per_s / 1e6, 1)
    return f"{bytes_per_s / 1e9:.2f} GB/s" if megabytes >= 1000 else f"{megabytes:.1f} MB/s"
