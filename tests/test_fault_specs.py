"""``--fault`` specs: each form gives its fault object; anything else gives a one-line ValueError naming the spec."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, strategies as st

from mirrorlab.sim import Clog, Crash, Cut, Delay, Drop, Isolate, Maybe, Preempt, Slow
from mirrorlab.sim.fault_specs import parse_fault

EXAMPLES = {
    "crash:1@step=3": Crash(1, at_step=3), "crash:0@collective=2": Crash(0, at_collective=2),
    "crash:2@save=1": Crash(2, during_save=1), "preempt:0@step=4": Preempt(0, 4), "slow:1:0.5": Slow(1, 0.5),
    "cut:0-1": Cut(0, 1), "drop:0-1:0.5": Drop(0, 1, 0.5), "drop:1-0": Drop(1, 0), "delay:0-1:0.25": Delay(0, 1, 0.25),
    "clog:0-1@2.0+5.0": Clog(0, 1, 2.0, 5.0), "isolate:1@3.0": Isolate(1, 3.0), "isolate:2@0+1.5": Isolate(2, 0.0, 1.5),
    "maybe:0.5/0.25:crash:1@step=3": Maybe(Crash(1, at_step=3), 0.5, 0.25), "maybe:1:cut:0-1": Maybe(Cut(0, 1), 1.0),
}


@pytest.mark.parametrize("spec", EXAMPLES)
def test_each_form_gives_its_fault(spec: str) -> None:
    assert parse_fault(spec) == EXAMPLES[spec]


@pytest.mark.parametrize(("spec", "says"), [
    ("boom:1", "unknown kind 'boom'"), ("crash:1@stp=3", "expected crash:WORKER@step=N"),
    ("crash:1@step=0", "N from 1"), ("crash:1", "expected crash:"), ("cut:0", "expected cut:A-B"),
    ("drop:0-1:1.5", "must be a probability between 0 and 1"), ("slow:1:1.2.3", "expected slow:"),
    ("clog:0-1@2.0", "expected clog:A-B@START+SECONDS"), ("clog:0-1@2+0", "seconds=0.0 must be"),
    ("clog:1-1@0+1", "a and b are both worker 1"), ("isolate:1", "expected isolate:WORKER@START[+SECONDS]"),
    ("maybe:2:cut:0-1", "enabled_probability=2.0 must be a probability"), ("maybe:0.5:cut:0", "expected cut:A-B"),
    ("maybe:0.5:maybe:0.5:cut:0-1", "must be one fault"), ("", "unknown kind ''"),
])
def test_a_bad_spec_is_named_with_the_accepted_form(spec: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_fault(spec)
    message = str(caught.value)
    assert message.startswith(f"fault {spec!r}: ") and says in message and "\n" not in message


@given(st.text(max_size=30))
def test_any_text_gives_a_fault_or_a_one_line_value_error(spec: str) -> None:
    try:
        parse_fault(spec)
    except ValueError as exc:
        assert "\n" not in str(exc).replace(repr(spec), "")


@given(st.integers(0, 99), st.integers(0, 99), st.floats(0, 1))
def test_drop_specs_round_trip(src: int, dst: int, probability: float) -> None:
    assume(src != dst)  # a worker sends itself nothing: such a Drop is refused (test_sim_settings.py)
    assert parse_fault(f"drop:{src}-{dst}:{probability!r}") == Drop(src, dst, probability)
