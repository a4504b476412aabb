"""The simulated network: per-pair FIFO mailboxes and one routing hook for latency and faults
(as Trio's fake net does), plus ``SimTransport``, the collective ``Transport`` over it.

Each pair's messages are numbered as they are sent and received strictly in that order, as over one TCP
stream: when a fault loses a message, its receiver waits for it (until a deadline, an abort or the deadlock
check) instead of taking the next one in its place, so a lost message never turns into wrong data."""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from mirrorlab import errors
from mirrorlab.collective.message import AbortNotice, Message
from mirrorlab.collective.transport import Transport
from mirrorlab.tensor import immutable

from .collective_batch import Meetings
from .faults import route_delay
from .scheduler import Scheduler, SimThread

__all__ = ["SimNetwork", "SimTransport", "seeded_route"]

Route = Callable[[int, int, int, float], "float | None"]
CountedPair = tuple[tuple[int, int, int], tuple[int, int], dict[int, int], int, int]
"""A pair's mailbox key, (src, dst), its receiver's next-message numbers, src, and a count of messages."""


class SimNetwork:
    """Mailboxes keyed by (group, src, dst) holding (number, message) in sending order.
    ``route(src, dst, nbytes, now)`` gives a delay or None (drop); ``on_loss(src, dst, nbytes)`` hears of each
    dropped message (the run records it in its trace). ``instant``: ``route`` always gives 0 (no latency, bandwidth
    limit or message fault), so collectives may be computed once for all members (``collective_batch``)."""

    def __init__(self, scheduler: Scheduler, route: Route, on_loss: Callable[[int, int, int], None] | None = None,
                 instant: bool = False) -> None:
        self.scheduler = scheduler
        self.route = route
        self.on_loss = on_loss
        self.instant = instant
        self.meetings = Meetings(self)
        self._boxes: dict[tuple[int, int, int], list[tuple[int, Message]]] = {}
        self._endpoints: dict[tuple[int, int], "SimTransport"] = {}
        self._last_arrival: dict[tuple[int, int, int], float] = {}
        self._numbers: dict[tuple[int, int, int], int] = {}  # messages sent per mailbox, lost ones included
        self._messages = 0
        self.dropped = 0
        self._sent: dict[tuple[int, int], int] = {}  # (src, dst) -> messages and abort notices sent
        self._unreceived: dict[int, int] = {}  # group -> messages sent one by one and not yet taken (lost ones too)
        self._pending: dict[int, list] = {}  # id(pairs) -> [pairs, times, last time]: counted, not yet added up
        self.lost: dict[tuple[int, int], int] = {}  # (src, dst) -> of those, dropped by a fault

    @property
    def messages(self) -> int:
        """Messages sent so far (lost ones included, abort notices not)."""
        self.settle()
        return self._messages

    @property
    def sent(self) -> dict[tuple[int, int], int]:
        """(src, dst) -> messages and abort notices sent so far."""
        self.settle()
        return self._sent

    def box(self, group: int, src: int, dst: int) -> list[tuple[int, Message]]:
        return self._boxes.setdefault((group, src, dst), [])

    def attach(self, endpoint: "SimTransport") -> None:
        self._endpoints[(endpoint.group, endpoint.rank)] = endpoint

    def loss_report(self, faults: tuple) -> str:
        """Which pairs lost how many messages to which faults, and that this is a network failure ("" if none)."""
        if not self.lost:
            return ""
        lines = [f"The network lost {sum(self.lost.values())} message(s) in this run:"]
        for (src, dst), lost in sorted(self.lost.items()):
            culprits = ", ".join(repr(f) for f in faults if f.loses(src, dst)) or "a fault"
            lines.append(f"  worker {src} -> worker {dst}: {lost} of {self.sent[(src, dst)]} lost ({culprits})")
        lines.append("The cause is the network (a firewall, a partition or a lossy link between those workers), "
                     "not mismatched collectives. Fix: make every worker reach every other on the ports of its "
                     "TF_CONFIG (firewall rules, routes); in the simulator, these are the faults you injected.")
        return "\n".join(lines)

    def groups_of(self, rank: int) -> list["SimTransport"]:
        return [e for (_, r), e in sorted(self._endpoints.items()) if r == rank]

    def _arrival(self, key: tuple[int, int, int], nbytes: int) -> float | None:
        pair = key[1:]
        self._sent[pair] = self._sent.get(pair, 0) + 1
        delay = self.route(key[1], key[2], nbytes, self.scheduler.now)
        if delay is None:
            self.dropped += 1
            self.lost[pair] = self.lost.get(pair, 0) + 1
            if self.on_loss is not None:
                self.on_loss(key[1], key[2], nbytes)
            return None
        # Per-pair FIFO, as over one TCP connection: a message never overtakes an earlier one.
        when = max(self.scheduler.now + delay, self._last_arrival.get(key, 0.0))
        self._last_arrival[key] = when
        return when

    def send(self, group: int, src: int, dst: int, message: Message) -> None:
        self.settle()
        key = (group, src, dst)
        number = self._numbers.get(key, 0)
        self._numbers[key] = number + 1
        self._unreceived[group] = self._unreceived.get(group, 0) + 1
        nbytes = int(getattr(message.payload, "nbytes", 0))
        when = self._arrival(key, nbytes)
        self._messages += 1
        if when is None:
            return
        self._at(when, lambda: self._deliver(key, number, message))

    def counted_pairs(self, group: int, counts: dict[tuple[int, int], int]) -> list[CountedPair]:
        """``counts[(src, dst)]`` messages of ``group`` per pair, as ``deliver_counted`` takes them (made once for a
        collective that repeats: its mailbox keys and its receivers' counters looked up once)."""
        return [((group, src, dst), (src, dst), self._endpoints[(group, dst)]._expected, src, count)
                for (src, dst), count in counts.items()]

    def deliver_counted(self, group: int, pairs: list[CountedPair], repeats: bool = False) -> bool:
        """If no message is in flight or waiting on any of these pairs, advance the counters as their counted
        instant messages, sent and received now, would have, and say so; else change nothing (False).

        When no message of ``group`` sent one by one is untaken, every pair is quiet. Then the counts of ``pairs``
        that ``repeats`` (the same list comes again for every instance of a collective) are only noted, and
        ``settle`` adds them up before anything reads the counters: O(1), not O(pairs), per instance."""
        if not self._unreceived.get(group):
            if not repeats:
                self._add(pairs, 1, self.scheduler.now)
                return True
            entry = self._pending.get(id(pairs))
            if entry is None:
                self._pending[id(pairs)] = [pairs, 1, self.scheduler.now]
            else:
                entry[1] += 1
                entry[2] = self.scheduler.now
            return True
        self.settle()
        boxes, numbers = self._boxes, self._numbers
        for key, _, expected, src, _ in pairs:
            if boxes.get(key) or numbers.get(key, 0) != expected.get(src, 0):
                return False
        self._add(pairs, 1, self.scheduler.now)
        return True

    def settle(self) -> None:
        """Add the counted messages noted by ``deliver_counted`` to the counters."""
        if self._pending:
            pending, self._pending = self._pending, {}
            for pairs, times, now in pending.values():
                self._add(pairs, times, now)

    def _add(self, pairs: list[CountedPair], times: int, now: float) -> None:
        numbers, sent, last = self._numbers, self._sent, self._last_arrival
        for key, pair, expected, src, count in pairs:
            count *= times
            numbers[key] = numbers.get(key, 0) + count
            expected[src] = expected.get(src, 0) + count
            sent[pair] = sent.get(pair, 0) + count
            last[key] = max(last.get(key, 0.0), now)
            self._messages += count

    def send_abort(self, group: int, src: int, dst: int, notice: AbortNotice) -> None:
        self.settle()
        when = self._arrival((group, src, dst), 0)
        if when is not None:
            self._at(when, lambda: self._endpoint_abort(group, dst, notice))

    def _at(self, when: float, action: Callable[[], None]) -> None:
        if when <= self.scheduler.now:
            action()
        else:
            self.scheduler.call_at(when, action)

    def _deliver(self, key: tuple[int, int, int], number: int, message: Message) -> None:
        # Kept sorted by number: two deliveries due at the same virtual time may run in either order.
        bisect.insort(self.box(*key), (number, message), key=lambda entry: entry[0])
        endpoint = self._endpoints.get((key[0], key[2]))
        if endpoint is not None:
            endpoint._notify(key[1])

    def _endpoint_abort(self, group: int, rank: int, notice: AbortNotice) -> None:
        endpoint = self._endpoints.get((group, rank))
        if endpoint is not None:
            endpoint.receive_abort(notice.to_error())


class SimTransport(Transport):
    """Rank ``rank`` of collective group ``group`` (the k-th strategy each worker created)."""

    def __init__(self, network: SimNetwork, group: int, rank: int, size: int) -> None:
        self.network = network
        self.group = group
        self.rank = rank
        self.size = size
        self._abort: errors.OpError | None = None
        self._waiting: tuple[SimThread, int] | None = None
        self._expected: dict[int, int] = {}  # src -> number of the next message to take from it
        self.meeting: Any = None  # the collective this endpoint waits to have computed with its peers, if any
        network.attach(self)

    def now(self) -> float:
        return self.network.scheduler.now

    @property
    def abort_error(self) -> errors.OpError | None:
        return self._abort

    @property
    def waiting_for(self) -> int | None:
        """The peer this endpoint is blocked on, if any."""
        if self.meeting is not None:
            return self.meeting.waiting_for(self.rank)
        return None if self._waiting is None else self._waiting[1]

    def execute(self, instance: Any, body: Callable[[Any], Any], closed_form: Any = None) -> Any:
        """On an instant network, compute the collective with its other members (``collective_batch``); alone, it
        sends nothing: run it."""
        if not self.network.instant or self._abort is not None or self.size == 1:
            return body(instance)
        return self.network.meetings.join(self, instance, body, closed_form)

    def send(self, dst: int, message: Message) -> None:
        payload = message.payload
        if isinstance(payload, np.ndarray) and not immutable(payload):
            payload = payload.copy()  # the network snapshots mutable memory, as serialization would
        self.network.send(self.group, self.rank, dst, Message(message.header, payload))

    def recv(self, src: int, deadline: float | None) -> Message:
        network = self.network
        network.settle()
        box = network.box(self.group, src, self.rank)
        scheduler = network.scheduler
        expected = self._expected.get(src, 0)
        while True:
            # A message that arrived before an abort notice still counts (as on a real socket); one that
            # arrived after a lost one does not stand in for it.
            if box and box[0][0] == expected:
                self._expected[src] = expected + 1
                network._unreceived[self.group] -= 1
                return box.pop(0)[1]
            if self._abort is not None:
                raise errors.clone(self._abort)
            if deadline is not None and scheduler.now >= deadline:
                raise errors.DeadlineExceededError(f"no message from worker {src} by t={deadline:g}")
            self._waiting = (scheduler.current, src)
            try:
                scheduler.block(f"waiting for a message from worker {src}", deadline)
            finally:
                self._waiting = None

    def _notify(self, src: int) -> None:
        if self._waiting is not None and self._waiting[1] == src:
            self.network.scheduler.wake(self._waiting[0])

    def receive_abort(self, error: errors.OpError) -> None:
        """Abort this endpoint (a peer's notice, or the simulated coordination service)."""
        if self._abort is None:
            self._abort = error
            if self.meeting is not None:  # it would have sent its messages and been waiting: it does so now
                self.network.meetings.release(self.meeting)
            if self._waiting is not None:
                self.network.scheduler.wake(self._waiting[0])

    def abort(self, error: errors.OpError) -> None:
        if self._abort is not None:
            return
        self._abort = error
        notice = AbortNotice.of(self.rank, error)
        for peer in range(self.size):
            if peer != self.rank:
                self.network.send_abort(self.group, self.rank, peer, notice)


def seeded_route(faults: tuple, latency: float, bandwidth: float | None, rng: random.Random) -> Route:
    """The routing hook: base latency + size/bandwidth, then the message faults in order."""
    counts: dict[Any, int] = {}

    def route(src: int, dst: int, nbytes: int, now: float) -> float | None:
        base = latency + (nbytes / bandwidth if bandwidth else 0.0)
        return route_delay(faults, src, dst, base, now, counts, rng)

    return route
