"""Randomized fault activation, as FoundationDB's buggify: ``Maybe(fault, enabled_probability, fire_probability)``.

Per run, and driven only by the run's seed, each ``Maybe`` site is enabled or not; an enabled one then acts at
each chance its fault gets (a step or collective boundary, a save point, a message) with ``fire_probability``.
The same seed gives the same activations and firings, and the run's report says which sites fired.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .faults import Fault
from .validation import check_probability

if TYPE_CHECKING:
    from .environment import SimWorkerEnv

__all__ = ["Maybe", "Activation", "activate"]


@dataclass(frozen=True, repr=False)
class Maybe(Fault):
    """``fault``, enabled in a run with ``enabled_probability``, then acting at each chance with
    ``fire_probability`` (both decided by the run's seed). The run replaces it by its activation (``activate``)."""

    fault: Fault
    enabled_probability: float = 0.5
    fire_probability: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.fault, Fault) or isinstance(self.fault, Maybe):
            raise ValueError(f"{self!r}: fault={self.fault!r} must be one fault such as Crash(1, at_step=3), not a "
                             "Maybe or anything else. Fix: wrap each fault in its own Maybe.")
        for name in ("enabled_probability", "fire_probability"):
            check_probability(repr(self), name, getattr(self, name))


class _Armed(Fault):
    """An enabled ``Maybe`` in one run: offers each hook call to its fault with ``fire_probability``, counting
    the calls where the fault acted (raised, cost virtual time, sent a termination notice, moved or lost a message)."""

    def __init__(self, site: Maybe, rng: random.Random) -> None:
        self.site = site
        self.rng = rng
        self.fired: list[str] = []  # where it acted, in order

    def _offer(self) -> bool:
        return self.rng.random() < self.site.fire_probability

    def _watch(self, env: "SimWorkerEnv", where: str, hook: Callable[[], None]) -> None:
        before = (env.run.scheduler.now, env.termination_noticed())
        try:
            hook()
        except BaseException:
            self.fired.append(where)
            raise
        if (env.run.scheduler.now, env.termination_noticed()) != before:
            self.fired.append(where)

    def at_boundary(self, env: "SimWorkerEnv", step: int | None, collective: int | None) -> None:
        if self._offer():
            where = f"worker {env.worker} before {f'step {step}' if step is not None else f'collective #{collective}'}"
            self._watch(env, where, lambda: self.site.fault.at_boundary(env, step, collective))

    def in_save(self, env: "SimWorkerEnv", save: int, point: str) -> None:
        if self._offer():
            self._watch(env, f"worker {env.worker} in save #{save} ({point})",
                        lambda: self.site.fault.in_save(env, save, point))

    def route(self, src: int, dst: int, delay: float, now: float, counts: dict[Fault, int],
              rng: random.Random) -> float | None:
        if not self._offer():
            return delay
        routed = self.site.fault.route(src, dst, delay, now, counts, rng)
        if routed != delay:
            self.fired.append(f"message {src} -> {dst} at t={now:.3f}")
        return routed

    def loses(self, src: int, dst: int) -> bool:
        return self.site.fault.loses(src, dst)

    def __repr__(self) -> str:
        return repr(self.site)


@dataclass(frozen=True)
class Activation:
    """A run's faults after its ``Maybe`` sites were decided: the ones that act, and each site's decision."""

    faults: tuple[Fault, ...]
    armed: tuple[_Armed, ...]
    disabled: tuple[Maybe, ...]

    def summary(self) -> str:
        """One line per ``Maybe`` site: disabled, or enabled and how often and where it fired ("" if none)."""
        lines = [f"  {site!r}: not enabled in this run" for site in self.disabled]
        for armed in self.armed:
            places = ", ".join(armed.fired[:3]) + (", ..." if len(armed.fired) > 3 else "")
            fired = f"fired {len(armed.fired)} time(s): {places}" if armed.fired else "never fired"
            lines.append(f"  {armed.site!r}: enabled, {fired}")
        return "randomized faults (decided by the seed):\n" + "\n".join(lines) if lines else ""

    def fired_comment(self) -> str:
        """A Python comment for the replay line naming the sites that fired ("" when none did)."""
        fired = [f"{armed.site!r} x{len(armed.fired)}" for armed in self.armed if armed.fired]
        return f"  # fired: {', '.join(fired)}" if fired else ""


def activate(faults: tuple[Fault, ...], seed: int) -> Activation:
    """Decide each ``Maybe`` of ``faults`` for the run with ``seed``. A site's random stream depends only on the
    seed, its repr and which equal site it is, so removing other faults (as Hypothesis does when it shrinks a
    schedule) leaves its decisions as they were."""
    active: list[Fault] = []
    armed: list[_Armed] = []
    disabled: list[Maybe] = []
    seen: dict[str, int] = {}
    for fault in faults:
        if not isinstance(fault, Maybe):
            active.append(fault)
            continue
        key = repr(fault)
        seen[key] = seen.get(key, 0) + 1
        rng = random.Random(f"maybe:{seed}:{key}:{seen[key]}")
        if rng.random() < fault.enabled_probability:
            armed.append(_Armed(fault, rng))
            active.append(armed[-1])
        else:
            disabled.append(fault)
    return Activation(tuple(active), tuple(armed), tuple(disabled))
