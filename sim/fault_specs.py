"""Faults written as short command-line specs (``crash:1@step=3``, ``cut:0-1``, ``drop:0-1:0.5``,
``clog:0-1@2.0+5.0``, ``isolate:1@3.0``, ``maybe:0.5/0.25:crash:1@step=3``), parsed into the
simulator's fault objects, with one-line errors that show the accepted forms."""

from __future__ import annotations

import re
from collections.abc import Callable

from .faults import Clog, Crash, Cut, Delay, Drop, Fault, Isolate, Preempt, Slow
from .randomized_faults import Maybe

__all__ = ["FAULT_FORMS", "parse_fault"]

_NUMBER = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"  # a non-negative decimal: 0.5, 2, 1e-3
# kind -> (the accepted form, a pattern for what follows "kind:", a builder from the pattern's groups)
_KINDS: dict[str, tuple[str, str, Callable[..., Fault]]] = {
    "crash": ("crash:WORKER@step=N (or @collective=N, @save=N; N from 1)",
              r"(\d+)@(step|collective|save)=([1-9]\d*)",
              lambda w, where, n: Crash(int(w), **{{"step": "at_step", "collective": "at_collective",
                                                     "save": "during_save"}[where]: int(n)})),
    "preempt": ("preempt:WORKER@step=N (N from 1)", r"(\d+)@step=([1-9]\d*)", lambda w, n: Preempt(int(w), int(n))),
    "slow": ("slow:WORKER:SECONDS_PER_STEP", r"(\d+):" + _NUMBER, lambda w, s: Slow(int(w), float(s))),
    "cut": ("cut:A-B", r"(\d+)-(\d+)", lambda a, b: Cut(int(a), int(b))),
    "drop": ("drop:SRC-DST[:PROBABILITY]", r"(\d+)-(\d+)(?::" + _NUMBER + ")?",
             lambda s, d, p: Drop(int(s), int(d), 1.0 if p is None else float(p))),
    "delay": ("delay:SRC-DST:SECONDS", r"(\d+)-(\d+):" + _NUMBER, lambda s, d, t: Delay(int(s), int(d), float(t))),
    "clog": ("clog:A-B@START+SECONDS", r"(\d+)-(\d+)@" + _NUMBER + r"\+" + _NUMBER,
             lambda a, b, t, s: Clog(int(a), int(b), float(t), float(s))),
    "isolate": ("isolate:WORKER@START[+SECONDS]", r"(\d+)@" + _NUMBER + r"(?:\+" + _NUMBER + ")?",
                lambda w, t, s: Isolate(int(w), float(t), None if s is None else float(s))),
    "maybe": ("maybe:ENABLED[/FIRE]:SPEC (probabilities; SPEC one of the other forms)",
              _NUMBER + r"(?:/" + _NUMBER + r")?:(.+)",
              lambda e, f, spec: Maybe(parse_fault(spec), float(e), 1.0 if f is None else float(f))),
}
FAULT_FORMS = ", ".join(form for form, _, _ in _KINDS.values())


def parse_fault(spec: str) -> Fault:
    """The fault ``spec`` describes; ValueError (one line, naming the spec and the accepted form) when it is not
    one of FAULT_FORMS or its numbers are out of range."""
    kind, _, rest = spec.partition(":")
    if kind not in _KINDS:
        raise ValueError(f"fault {spec!r}: unknown kind {kind!r}; use one of {FAULT_FORMS}")
    form, pattern, build = _KINDS[kind]
    match = re.fullmatch(pattern, rest)
    if match is None:
        raise ValueError(f"fault {spec!r}: expected {form}")
    try:
        return build(*match.groups())
    except ValueError as exc:  # the fault's own check of its numbers (sim/faults.py)
        raise ValueError(f"fault {spec!r}: {str(exc).splitlines()[0]}") from None
