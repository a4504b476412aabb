"""Collectives computed once for all workers, when the simulator can prove that changes nothing.

On a network where every message arrives at once (no latency, no bandwidth limit, no fault acting on messages),
a worker entering a collective instance runs its algorithm ahead (``dry_run``): sends are recorded, receives return
``Placeholder``s, and the worker blocks once. When every member of the instance has arrived in the same virtual
instant, with the same identity (sequence number, fingerprint, request kind and call site), the last one matches
every send with its receive in the network's per-pair order, advances the network's counters as the messages
would have, computes every rank's result once (``lazy_eval``) and wakes the others: a collective costs each worker
one block, not one per message, and a 1024-worker cluster holds one copy of each result, not 1024.

An all-reduce whose caller states it whole (``ClosedForm``: every rank's result is ``total`` of the ranks' inputs,
in the algorithm's order of additions) is cheaper still: its messages are counted once per algorithm,
fingerprint and cluster size (by the dry run and match above, its local sum only described), and from then on its
members just hand over their inputs and the last one computes ``total`` once, for everyone.

Whenever that is not proven, the members that were waiting run their collective message by message, as before,
in the same virtual instant: a member whose algorithm needs the bytes of a message, a member with another
identity, an abort reaching a member, the scheduler running out of runnable threads (a member is missing), or a
schedule that would not complete. Their messages then carry real data through the network and its faults.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mirrorlab.collective.closed_form import ClosedForm
from mirrorlab.collective.communicator import Instance
from mirrorlab.tensor import frozen

from .lazy_array import Described, Filled, NeedsData, Placeholder, lift
from .lazy_eval import Materializer

if TYPE_CHECKING:
    from .network import CountedPair, SimNetwork, SimTransport
    from .scheduler import SimThread

__all__ = ["Meetings", "dry_run"]

Op = tuple[int, int, Any, bool]  # (peer, step, payload or placeholder, is a receive)


class _Recorder(Instance):
    """An instance whose sends are recorded (what they carry as it reads when sent), whose receives return
    placeholders and whose allocated arrays are described ones, sealed when the algorithm returns."""

    def __init__(self, inst: Instance, ops: list[Op], counting: bool) -> None:
        super().__init__(inst.comm, inst.state, inst.deadline, inst.timeout)
        self.ops = ops
        self.filled: list[Filled] = []
        self.counting = counting  # only the messages matter (a closed form gives the result): describe local sums

    def send(self, peer: int, payload: Any, step: int) -> None:
        self.ops.append((peer, step, lift(payload), False))

    def combine(self, total: Callable[[Sequence[Any]], Any], arrays: Sequence[Any]) -> Any:
        if not self.counting:
            return total(arrays)  # described operation by operation where it can be, else it needs data
        return Described(next(a for a in arrays if isinstance(a, np.ndarray)))

    def recv(self, peer: int, step: int) -> Any:
        placeholder = Placeholder(peer, step)
        self.ops.append((peer, step, placeholder, True))
        return placeholder

    def empty_like(self, like: Any) -> Any:
        if like.ndim != 1:
            raise NeedsData("an allocated array of more than one dimension")
        filled = Filled(like.shape[0], like.dtype)
        self.filled.append(filled)
        return filled

    def seal(self) -> None:
        for filled in self.filled:
            filled.seal()


class _Plan:
    """One member's collective, run ahead: its operations, its described result, and how it ended."""

    __slots__ = ("transport", "inst", "body", "ops", "result", "thread", "closed", "value", "computed")

    def __init__(self, transport: "SimTransport", inst: Instance, body: Callable[[Instance], Any], ops: list[Op] | None,
                 result: Any, thread: "SimThread", closed: ClosedForm | None) -> None:
        self.transport, self.inst, self.body, self.ops, self.result, self.thread, self.closed = (
            transport, inst, body, ops, result, thread, closed)  # ops None: a closed form whose messages are counted
        self.value: Any = None
        self.computed = False


def dry_run(inst: Instance, body: Callable[[Instance], Any], counting: bool = False
            ) -> tuple[list[Op], Any] | NeedsData | None:
    """``body``'s operations and described result; else the ``NeedsData`` it stopped at, or None when it failed
    (then the message-by-message run raises the same error). ``counting``: only the operations will be used."""
    ops: list[Op] = []
    recorder = _Recorder(inst, ops, counting)
    try:
        result = body(recorder)
        recorder.seal()
    except NeedsData as needs:
        return needs
    except Exception:
        return None
    return ops, result


class _Meeting:
    """The members of one collective instance that have arrived, by rank."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.plans: dict[int, _Plan] = {}
        self._present_below = 0  # every rank below this one has arrived (members only ever arrive)

    def identity(self) -> Any:
        return next(iter(self.plans.values())).inst.state

    def waiting_for(self, rank: int) -> int | None:
        """The peer ``rank`` would be waiting for now, had every member present sent what it could (for members
        whose messages are not recorded: the first member missing)."""
        if any(plan.ops is None for plan in self.plans.values()):
            return self.first_missing()
        return self.match()[0].get(rank)

    def first_missing(self) -> int | None:
        rank = self._present_below
        while rank < self.size and rank in self.plans:
            rank += 1
        self._present_below = rank
        return rank if rank < self.size else None

    def match(self) -> tuple[dict[int, int], dict[tuple[int, int], int], bool]:
        """Play the members' operations in per-pair FIFO order, binding each placeholder to its message: which peer
        each blocked member waits for, how many messages each pair carried, and whether all were received."""
        queues: dict[tuple[int, int], deque] = {}
        counts: dict[tuple[int, int], int] = {}
        cursor = dict.fromkeys(self.plans, 0)
        waiting: dict[int, int] = {}
        work = deque(sorted(self.plans))
        while work:
            rank = work.popleft()
            ops, i = self.plans[rank].ops, cursor[rank]
            while i < len(ops):
                peer, _, obj, is_recv = ops[i]
                if is_recv:
                    queue = queues.get((peer, rank))
                    if not queue:
                        waiting[rank] = peer
                        break
                    obj.bind(queue.popleft())
                else:
                    queues.setdefault((rank, peer), deque()).append(obj)
                    counts[(rank, peer)] = counts.get((rank, peer), 0) + 1
                    if waiting.get(peer) == rank:
                        del waiting[peer]
                        work.append(peer)
                i += 1
            cursor[rank] = i
        complete = not waiting and not any(queues.values())
        return waiting, counts, complete


class Meetings:
    """The collective instances whose members wait to be computed together (one per (group, sequence number))."""

    def __init__(self, network: "SimNetwork") -> None:
        self.network = network
        self._open: dict[tuple[int, int], _Meeting] = {}
        self.computed = 0  # collective instances computed once for all their members so far (the rest: per message)
        # (algorithm, fingerprint, size, rank) whose dry run needed data: it would again, so it is not tried again
        self._needs_data: set[tuple] = set()
        # (algorithm, fingerprint, size) of a closed form -> messages per (src, dst) pair, as matched once
        self._counts: dict[tuple, dict[tuple[int, int], int]] = {}
        self._pairs: dict[tuple, list[CountedPair]] = {}  # (group, that key) -> the counts as the network takes them

    def join(self, transport: "SimTransport", inst: Instance, body: Callable[[Instance], Any],
             closed: ClosedForm | None = None) -> Any:
        """Run ``body`` (this member's collective) together with the other members, or message by message;
        ``closed``: the same collective stated whole (then computed from it)."""
        key = (transport.group, inst.state.seq)
        meeting = self._open.get(key)
        if meeting is not None and (meeting.identity() != inst.state or transport.rank in meeting.plans):
            self.release(meeting)
            return body(inst)
        counted = (inst.algorithm, inst.state.fingerprint, transport.size) in self._counts if closed else False
        plan_key = (inst.algorithm, inst.state.fingerprint, transport.size, transport.rank)
        if counted:
            ahead: Any = (None, None)
        else:
            ahead = None if plan_key in self._needs_data else dry_run(inst, body, counting=closed is not None)
        if isinstance(ahead, NeedsData) and inst.algorithm is not None:
            self._needs_data.add(plan_key)  # the same algorithm on the same shapes stops at the same place
        if ahead is None or isinstance(ahead, NeedsData):
            if meeting is not None:
                self.release(meeting)
            return body(inst)
        if meeting is None:
            meeting = self._open[key] = _Meeting(transport.size)
        plan = _Plan(transport, inst, body, *ahead, self.network.scheduler.current, closed)
        meeting.plans[transport.rank] = plan
        if len(meeting.plans) < meeting.size:
            return self._wait(meeting, plan)
        del self._open[key]
        if not self._compute(meeting):
            self._fall_back(meeting, plan)
            return body(inst)
        self.computed += 1
        for other in meeting.plans.values():
            if other is not plan:
                self.network.scheduler.wake(other.thread)
        return plan.value

    def _wait(self, meeting: _Meeting, plan: _Plan) -> Any:
        if plan.ops is None:
            first = meeting.first_missing()
        else:
            first = next((op[0] for op in plan.ops if op[3]), None)
        plan.transport.meeting = meeting
        try:
            self.network.scheduler.block(f"waiting for a message from worker {first}")
        finally:
            plan.transport.meeting = None
        if plan.computed:
            return plan.value
        return plan.body(plan.inst)

    def release(self, meeting: _Meeting) -> None:
        """Let the waiting members of ``meeting`` run their collective message by message (in this instant)."""
        for key, open_meeting in list(self._open.items()):
            if open_meeting is meeting:
                del self._open[key]
        self._fall_back(meeting, None)

    def _fall_back(self, meeting: _Meeting, caller: _Plan | None) -> None:
        for plan in meeting.plans.values():
            if plan is not caller:
                plan.transport.meeting = None
                self.network.scheduler.wake(plan.thread)

    def release_all(self) -> bool:
        """Release every waiting meeting (the scheduler has nothing else to run); whether there was one."""
        meetings = list(self._open.values())
        for meeting in meetings:
            self.release(meeting)
        return bool(meetings)

    def _compute(self, meeting: _Meeting) -> bool:
        """Match, count and compute every member's collective; False (nothing changed) when that is not proven."""
        net = self.network
        plans = meeting.plans
        first = next(iter(plans.values()))
        group, closed = first.transport.group, first.closed is not None
        for p in plans.values():  # (a loop, not any(): this runs once per collective, over every member)
            if p.transport.abort_error is not None or (p.closed is not None) != closed:
                return False
        counts_key = (first.inst.algorithm, first.inst.state.fingerprint, meeting.size)
        pairs = self._pairs.get((group, counts_key)) if closed else None
        if pairs is None:
            counts = self._counts.get(counts_key) if closed else None
            if counts is None:
                if any(p.ops is None for p in plans.values()):
                    return False
                _, counts, complete = meeting.match()
                if not complete:
                    return False
            pairs = net.counted_pairs(group, counts)
            if closed:
                self._counts[counts_key] = counts
                self._pairs[(group, counts_key)] = pairs
        if not net.deliver_counted(group, pairs, repeats=closed):
            return False
        if closed:
            total = frozen(first.closed.total([plans[rank].closed.flat for rank in range(meeting.size)]))
            for plan in plans.values():
                plan.value = plan.closed.finish(total)
                plan.computed = True
            return True
        materializer = Materializer(meeting.size)
        for plan in plans.values():
            plan.value = materializer.results(plan.result)
            plan.computed = True
        return True
