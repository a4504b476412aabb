"""The same-host shared-memory Transport: the collective algorithms run over it unchanged and give the
simulator's results bit for bit; deadlines, aborts, goodbyes and dead peers end every wait; nothing is
left in /dev/shm. Multi-process tests use the spawn context, are bounded in time and kill only their own
processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shm_workers
from mirrorlab import errors
from mirrorlab.backend.shm_frame import FrameError, encode, header_length, parse_header
from mirrorlab.backend.wire import WireLimits
from mirrorlab.backend.shm_segment import SHM_DIR
from mirrorlab.backend.shm_transport import ShmTransport, default_ring_bytes
from mirrorlab.collective.message import Fingerprint, Header, Message
from mirrorlab.sim import SimCluster

pytestmark = pytest.mark.skipif(not SHM_DIR.is_dir() or not hasattr(os, "pidfd_open"),
                                reason="needs Linux /dev/shm and pidfd_open")


@pytest.fixture
def session():
    """A fresh session name; afterwards no segment of it may be left in /dev/shm."""
    name = f"t{uuid.uuid4().hex[:12]}"
    yield name
    assert sorted(SHM_DIR.glob(f"mirrorlab-{name}-*")) == []


def _spawn(target, args_of_rank, size: int) -> list:
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=args_of_rank(r), daemon=True) for r in range(size)]
    for p in processes:
        p.start()
    return processes


def _join(processes: list, timeout: float) -> None:
    """Wait for our processes, at most ``timeout`` seconds in all; kill (by pid) the ones still running."""
    end = time.monotonic() + timeout
    for p in processes:
        p.join(max(0.1, end - time.monotonic()))
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join(5)


def _simulated_results(size: int) -> list[dict[str, np.ndarray]]:
    """The same cases run by the same algorithms over the simulator's network."""
    def program():
        import mirrorlab.tf as tf
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return shm_workers.run_cases(strategy.extended._group.comm, seed=0)
    return SimCluster(workers=size, seed=3).run(program).values()


@pytest.mark.parametrize("size", [2, 3, 4])
def test_allreduce_over_shared_memory_equals_the_simulator_bit_for_bit(size, session, tmp_path):
    processes = _spawn(shm_workers.allreduce_worker, lambda r: (session, r, size, 0, str(tmp_path)), size)
    _join(processes, 120)
    problems = {p.name: (tmp_path / f"{r}.error").read_text() for r, p in enumerate(processes)
                if (tmp_path / f"{r}.error").exists()}
    assert problems == {} and [p.exitcode for p in processes] == [0] * size
    simulated = _simulated_results(size)
    for algorithm, dtype, length in shm_workers.cases():
        key = f"{algorithm}-{dtype}-{length}"
        for rank in range(size):
            got = np.load(tmp_path / f"{rank}-{key}.npy", allow_pickle=False)
            assert got.dtype == np.dtype(dtype) and got.shape == (length,)
            np.testing.assert_array_equal(got, simulated[rank][key], err_msg=f"{key} on rank {rank}")


def test_kill_9_during_an_allreduce_makes_the_others_name_the_dead_rank(session, tmp_path):
    size, victim = 3, 1
    processes = _spawn(shm_workers.endless_worker, lambda r: (session, r, size, str(tmp_path)), size)
    try:
        end = time.monotonic() + 60
        while not all((tmp_path / f"{r}.started").exists() for r in range(size)) and time.monotonic() < end:
            time.sleep(0.05)
        assert all((tmp_path / f"{r}.started").exists() for r in range(size)), "the workers never got going"
        os.kill(processes[victim].pid, signal.SIGKILL)
        for r in (0, 2):
            processes[r].join(30)  # bounded: a survivor still blocked after 30 s fails the test
            text = (tmp_path / f"{r}.error").read_text()
            assert text.startswith("UnavailableError\n"), text
            assert f"worker {victim} (/job:worker/task:{victim}, pid {processes[victim].pid})" in text
    finally:
        _join(processes, 10)


def _pair(session: str, ring_bytes: int = 1 << 16, size: int = 2) -> list[ShmTransport]:
    """``size`` transports of one group in this process (connected from threads)."""
    found: dict[int, ShmTransport] = {}
    threads = [threading.Thread(target=lambda r=r: found.__setitem__(r, ShmTransport.connect(
        session, r, size, ring_bytes=ring_bytes, timeout=20))) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return [found[r] for r in range(size)]


def _message(sender: int, payload, seq: int = 1) -> Message:
    return Message(Header(seq, Fingerprint("all_reduce", str(payload.dtype), payload.shape), 0, sender, "t"), payload)


def test_messages_larger_than_the_ring_arrive_whole_and_in_order(session):
    a, b = _pair(session, ring_bytes=4096)
    big = [np.arange(50_000, dtype=np.float64) * k for k in range(3)]
    try:
        for k, x in enumerate(big):  # never blocks although 1.2 MB far exceeds the 4 KiB ring
            a.send(1, _message(0, x, seq=k))
        for k, x in enumerate(big):
            got = b.recv(0, time.monotonic() + 20)
            assert got.header.seq == k
            np.testing.assert_array_equal(got.payload, x)
            assert not got.payload.flags.writeable
    finally:
        a.close()
        b.close()


def test_a_payload_changed_after_send_arrives_as_it_was_sent(session):
    a, b = _pair(session, ring_bytes=4096)
    try:
        x = np.ones(10_000, np.float32)
        a.send(1, _message(0, x))
        x[:] = 7
        np.testing.assert_array_equal(b.recv(0, time.monotonic() + 20).payload, np.ones(10_000, np.float32))
    finally:
        a.close()
        b.close()


def test_recv_honours_its_deadline(session):
    a, b = _pair(session)
    try:
        start = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            b.recv(0, start + 0.2)
        assert time.monotonic() - start < 5
    finally:
        a.close()
        b.close()


def test_abort_wakes_a_blocked_peer_with_the_abort_error(session):
    transports = _pair(session, size=3)
    try:
        caught = []
        waiter = threading.Thread(target=lambda: caught.append(_raised(lambda: transports[2].recv(0, None))))
        waiter.start()
        time.sleep(0.2)
        transports[1].abort(errors.InvalidArgumentError("shape mismatch on worker 1"))
        waiter.join(10)
        assert not waiter.is_alive()
        assert isinstance(caught[0], errors.InvalidArgumentError) and "shape mismatch on worker 1" in str(caught[0])
        assert isinstance(transports[0].abort_error, errors.InvalidArgumentError)
    finally:
        for t in transports:
            t.close()


def test_a_message_sent_before_an_abort_is_still_received(session):
    a, b = _pair(session)
    try:
        a.send(1, _message(0, np.arange(3)))
        a.abort(errors.CancelledError("stop"))
        np.testing.assert_array_equal(b.recv(0, None).payload, np.arange(3))
        with pytest.raises(errors.CancelledError):
            b.recv(0, None)
    finally:
        a.close()
        b.close()


def test_a_peer_that_closed_fails_the_wait_for_its_message(session):
    a, b = _pair(session)
    a.close()
    try:
        with pytest.raises(errors.UnavailableError, match="worker 0 .* finished its program"):
            b.recv(0, time.monotonic() + 20)
    finally:
        b.close()


def test_connect_names_the_workers_that_never_joined(session):
    with pytest.raises(errors.UnavailableError, match=r"workers \[1, 2\]"):
        ShmTransport.connect(session, 0, 3, timeout=0.3)


def test_workers_must_agree_on_the_ring_size(session):
    found = []
    other = threading.Thread(target=lambda: found.append(_raised(
        lambda: ShmTransport.connect(session, 1, 2, ring_bytes=8192, timeout=2))))
    other.start()
    found.append(_raised(lambda: ShmTransport.connect(session, 0, 2, ring_bytes=4096, timeout=2)))
    other.join(10)
    # whoever maps the other's segment first names the mismatch; the other then waits in vain
    assert all(isinstance(e, (errors.InvalidArgumentError, errors.UnavailableError)) for e in found)
    mismatch = [str(e) for e in found if isinstance(e, errors.InvalidArgumentError)]
    assert mismatch and "ring_bytes=" in mismatch[0] and "same cluster size and ring size" in mismatch[0]


def test_a_rank_taken_twice_is_refused(session):
    first = threading.Thread(target=lambda: _raised(lambda: ShmTransport.connect(session, 0, 2, timeout=1)))
    first.start()
    time.sleep(0.2)
    with pytest.raises(errors.AlreadyExistsError, match="rank 0"):
        ShmTransport.connect(session, 0, 2, timeout=1)
    first.join(10)


def _raised(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - returned for the assertion
        return exc
    return None


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64", "int8", "uint16", "complex64", "bool"]),
       shape=st.lists(st.integers(0, 4), max_size=4), seq=st.integers(0, 2**40))
def test_frames_round_trip_header_dtype_and_shape(dtype, shape, seq):
    payload = np.zeros(shape, dtype)
    prefix, body = encode(_message(3, payload, seq), WireLimits())
    length = header_length(prefix[:8].tobytes(), WireLimits())
    header, got_dtype, got_shape = parse_header(prefix[8:8 + length].tobytes(), 3, WireLimits())
    assert (header.seq, got_dtype, got_shape, len(body)) == (seq, np.dtype(dtype), tuple(shape), payload.nbytes)


def test_frames_are_refused_before_any_allocation():
    prefix, _ = encode(_message(0, np.zeros((2, 3), np.float32)), WireLimits())
    text = prefix[8:].tobytes()
    with pytest.raises(FrameError, match="claims sender 0"):
        parse_header(text, 1, WireLimits())
    with pytest.raises(FrameError, match="exceeds the limit"):
        parse_header(text, 0, WireLimits(max_bytes=8))
    with pytest.raises(FrameError, match="not accepted"):
        parse_header(text, 0, WireLimits(dtypes=("int8",)))
    with pytest.raises(FrameError, match="corrupt stream"):
        header_length(b"XXXX\x00\x00\x00\x00", WireLimits())
    with pytest.raises(FrameError, match="cannot send dtype"):
        encode(_message(0, np.array(["a"])), WireLimits())


def test_a_writer_stops_streaming_to_a_peer_that_said_goodbye(session):
    a, b = _pair(session, ring_bytes=4096)
    try:
        a.send(1, _message(0, np.zeros(100_000, np.float32)))  # far more than the ring: the writer thread holds the rest
        outgoing = a._outgoing[1]
        assert not outgoing.idle()
        b.close()
        end = time.monotonic() + 10
        while not outgoing.idle() and time.monotonic() < end:
            time.sleep(0.01)
        assert outgoing.idle()  # dropped, instead of waiting forever for room in a ring nobody reads
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("size", [2, 3, 4, 8, 64])
def test_default_rings_hold_a_64_mib_ring_chunk_within_256_mib_per_worker(size):
    ring = default_ring_bytes(size)
    assert ring % 4096 == 0 and 4 << 20 <= ring <= 64 << 20
    assert ring * (size - 1) <= 256 << 20 or ring == 4 << 20
    if size <= 4:
        assert ring >= (64 << 20) // size + 4096  # a chunk plus its header goes in without the writer thread
