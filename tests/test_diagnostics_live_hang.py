"""Hang findings from what one live worker knows (diagnostics/live_hang.py): its own position and each peer's answer
to a ping. The real-process tests are in tests/test_backend_hang_diagnosis.py; these pin down each case's words."""

from __future__ import annotations

from hypothesis import given, strategies as st

from mirrorlab.diagnostics.live_hang import Liveness, Position, WorkerView, check_live_hang

AR = "all_reduce(SUM) float32[4]"


def _view(rank: int, liveness: Liveness = Liveness.ALIVE, completed: int = 0, entered: int = 0,
          site: str = "train.py:9") -> WorkerView:
    return WorkerView(rank, f"worker:{rank}", liveness, Position(completed, AR, site) if completed else None,
                      Position(entered, AR, site) if entered else None)


def test_an_alive_worker_that_never_entered_is_named_by_majority() -> None:
    [f] = check_live_hang([_view(0, entered=5), _view(1, completed=4), _view(2, entered=5)])
    assert f.code == "ML-TRC-010" and f.workers == ("worker:1",)
    assert f.message.startswith(f"worker 1 last completed {AR} #4 at train.py:9 and never entered #5, which workers "
                                "0, 2 entered at train.py:9. worker 1 still answers heartbeats: it is alive")
    assert "Majority rule: worker 1 (1 of 3)" in f.message
    assert "worker 1 (worker:1): alive; after" in f.evidence


def test_how_long_an_alive_worker_has_called_no_collective() -> None:
    idle = WorkerView(1, "worker:1", Liveness.ALIVE, Position(4, AR, "t.py:1"), idle_s=12.25)
    [f] = check_live_hang([_view(0, entered=5), idle, _view(2, entered=5)])
    assert "worker 1 still answers heartbeats and has called no collective for 12.2 s: it is alive" in f.message
    assert f"worker 1 (worker:1): alive; after {AR} #4 at t.py:1 (completed 12.2 s before it said so)" in f.evidence


def test_a_collective_only_the_chief_calls_blames_the_minority() -> None:
    [f] = check_live_hang([_view(0, entered=5), _view(1, completed=4), _view(2, completed=4)])
    assert f.code == "ML-TRC-010" and f.workers == ("worker:0",)
    assert "Only a minority entered #5: a collective that only worker 0 calls" in f.message


def test_a_two_worker_split_is_a_tie() -> None:
    [f] = check_live_hang([_view(0, entered=3), _view(1, completed=2)])
    assert "No majority: worker 0 against worker 1" in f.message and set(f.workers) == {"worker:0", "worker:1"}


def test_dead_and_silent_workers_are_told_apart() -> None:
    [gone] = check_live_hang([_view(0, entered=5), _view(1, Liveness.GONE, completed=4), _view(2, entered=5)])
    assert gone.code == "ML-TRC-011" and "worker 1 died: its port refuses connections" in gone.message
    [silent] = check_live_hang([_view(0, entered=5), _view(1, Liveness.SILENT, completed=4)])
    assert silent.code == "ML-TRC-011" and "worker 1 stopped answering" in silent.message
    assert "died" not in silent.message and silent.fix.startswith("Look at worker 1 itself: stopped (SIGSTOP")
    assert gone.fix.startswith("Read worker 1's own log")


def test_a_worker_that_died_inside_the_collective() -> None:
    [f] = check_live_hang([_view(0, entered=5), _view(1, Liveness.GONE, entered=5), _view(2, entered=5)])
    assert f.code == "ML-TRC-011" and f.workers == ("worker:1",)
    assert f.message.startswith(f"worker 1 was last reported in {AR} #5 at train.py:9; worker 1 died: its port")
    assert f.message.endswith(f"workers 0, 2 wait in {AR} #5 at train.py:9 for its data.")


def test_all_alive_inside_one_collective_is_stuck_not_missing() -> None:
    [f] = check_live_hang([_view(0, entered=5), _view(1, entered=5), _view(2, completed=5)])
    assert f.code == "ML-TRC-012" and f.workers == ("worker:0", "worker:1")
    assert "which worker 2 completed; every worker reached #5 and answers heartbeats" in f.message


def test_a_finished_worker_and_an_unknown_position() -> None:
    [f] = check_live_hang([_view(0, entered=4), _view(1, Liveness.FINISHED, completed=2), _view(2, entered=4)])
    assert f.code == "ML-TRC-010" and f.message.startswith(
        f"worker 1 finished its program (said goodbye) while workers 0, 2 wait in {AR} #4")
    [unknown] = check_live_hang([_view(0, entered=3), _view(1, Liveness.GONE), _view(2, entered=3)])
    assert unknown.message.startswith("no heartbeat from worker 1 reported a collective of this group yet, and it "
                                      "never entered #3")


def test_nothing_to_explain() -> None:
    assert check_live_hang([_view(0), _view(1)]) == []
    assert check_live_hang([_view(0, completed=3), _view(1, completed=3)]) == []


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                                  max_size=3), max_leaves=12)


@given(_json)
def test_a_peers_reported_position_is_taken_only_when_well_formed(raw: object) -> None:
    position = Position.from_json(raw)
    assert position is None or (position.seq >= 1 and position.to_json() == [raw[0], raw[1][:300], raw[2][:300]])
    assert Position.from_json([3, AR, "t.py:1"]) == Position(3, AR, "t.py:1")
    assert Position.from_json([True, AR, "t.py:1"]) is None and Position.from_json([0, AR, "t.py:1"]) is None


@st.composite
def _views(draw: st.DrawFn) -> list[WorkerView]:
    """2-5 workers, each alive, finished, gone or silent, having completed some collective and maybe in the next."""
    views = []
    for rank in range(draw(st.integers(2, 5))):
        completed = draw(st.integers(0, 4))
        entered = completed + 1 if draw(st.booleans()) else 0
        views.append(_view(rank, draw(st.sampled_from(list(Liveness))), completed, entered,
                           draw(st.sampled_from(["a.py:1", "b.py:2"]))))
    return views


@given(_views())
def test_any_mix_of_views_gives_at_most_one_well_formed_finding(views: list[WorkerView]) -> None:
    findings = check_live_hang(views)
    assert len(findings) <= 1
    for f in findings:
        assert f.code in {"ML-TRC-010", "ML-TRC-011", "ML-TRC-012"} and f.workers
        assert set(f.workers) <= {v.label for v in views}
        assert "workers  " not in f.message and "worker ," not in f.message and f.fix
    if any(v.entered is not None for v in views) and not findings:
        assert all(v.liveness is Liveness.FINISHED for v in views if v.entered is not None)
