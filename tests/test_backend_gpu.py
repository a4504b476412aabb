"""GPU support of the real backend. On any machine: which path each collective takes, the NCCL-without-GPU
fall-back (said once, in the log and in ``strategy.extended``), GPU slices per worker, the NCCL unique-id exchange
over gRPC on loopback, pinned-staging bookkeeping, the bounded wait for device work, and that no new module
imports CuPy. Marked ``gpu`` (skipped without CuPy and GPUs): NCCL and staged all-reduces equal to the CPU path,
the staging round trip, a real NCCL id over gRPC, and a dead peer during an NCCL all-reduce ending in an error."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mirrorlab import errors
from mirrorlab.backend.device_wait import wait_for_device
from mirrorlab.backend.gpu_devices import (GPUS_VAR, VISIBLE_VAR, check_visible, gpu_slice, gpus_per_worker,
                                           launch_gpu_envs, visible_devices_for)
from mirrorlab.backend.gpu_lane import GpuLane
from mirrorlab.backend.grpc_transport import GrpcTransport, PeerNode
from mirrorlab.backend.nccl_choice import NCCL_DTYPES, NCCL_NO_GPU, NCCL_OPS, collective_path
from mirrorlab.backend.nccl_comm import NCCL_FACT, NcclCollectives, nccl_fact
from mirrorlab.backend.nccl_unique_id import MAX_ID_BYTES, UniqueIdExchange, cupy_ids, id_bytes
from mirrorlab.backend.pinned_staging import StagingBuffer
from mirrorlab.backend.ports import free_ports
from mirrorlab.collective.communicator import Communicator
from mirrorlab.collective.message import Fingerprint
from mirrorlab.communication import CommunicationImplementation as Impl
from mirrorlab.placement import gpu_module

from test_backend_processes import results, run_launch

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")

TOKEN = "s3cret"
NEW_MODULES = ["gpu_devices", "gpu_lane", "nccl_choice", "nccl_comm", "nccl_unique_id", "pinned_staging",
               "device_wait", "environment", "launch"]

# -- which path a collective takes -------------------------------------------------------------------------


@pytest.mark.parametrize("op, impl, on_gpu, dtype, path", [
    ("all_reduce", Impl.NCCL, False, "float32", "host"),
    ("all_reduce", Impl.NCCL, True, "float32", "nccl"),
    ("broadcast", Impl.NCCL, True, "int64", "nccl"),
    ("all_gather", Impl.NCCL, True, "float32", "staged"),  # TF: NCCL only all-reduces; blocks may differ
    ("all_reduce", Impl.NCCL, True, "bool", "staged"),  # NCCL has no bool sum
    ("all_reduce", Impl.RING, True, "float32", "staged"),
    ("all_reduce", Impl.AUTO, True, "float32", "staged"),  # TF2's AUTO runs as RING on GPUs
    ("all_reduce", Impl.RING, False, "float32", "host"),
])
def test_each_collective_takes_the_path_tf_would(op, impl, on_gpu, dtype, path):
    assert collective_path(op, impl, on_gpu, dtype) == path


def test_without_an_nccl_library_nccl_requests_are_staged_and_every_worker_must_agree():
    assert collective_path("all_reduce", Impl.NCCL, True, "float32", nccl_available=False) == "staged"
    assert nccl_fact(False) == {NCCL_FACT: "cpu"}  # CuPy is not even looked at without GPUs


@given(st.sampled_from(["all_reduce", "all_gather", "broadcast", "barrier"]), st.sampled_from(list(Impl)),
       st.booleans(), st.sampled_from([*NCCL_DTYPES, "bool", "complex64", ""]), st.booleans())
def test_nccl_runs_only_device_arrays_of_its_ops_and_dtypes(op, impl, on_gpu, dtype, available):
    path = collective_path(op, impl, on_gpu, dtype, available)
    assert (path == "host") == (not on_gpu)
    assert (path == "nccl") == (on_gpu and impl == Impl.NCCL and op in NCCL_OPS and dtype in NCCL_DTYPES
                                and available)


def _lane(has_gpus, fallbacks):
    node = PeerNode(0, ["/job:worker/replica:0/task:0"], ["127.0.0.1:1"], TOKEN)  # never started
    return GpuLane(0, UniqueIdExchange(node), 5.0, has_gpus, lambda: fallbacks.append(1))


def test_nccl_without_gpus_is_said_once_and_runs_the_host_algorithm(caplog):
    fallbacks = []
    lane = _lane(False, fallbacks)

    def run(inst, array):
        return array

    with caplog.at_level("WARNING", logger="mirrorlab.backend"):
        for op in ("barrier", "all_reduce", "broadcast"):
            assert lane.route(op, Impl.NCCL, np.ones(3, np.float32), "ring", run) == ("ring", run)
    assert fallbacks == [1]
    assert [r.getMessage().startswith(NCCL_NO_GPU) for r in caplog.records] == [True]


def test_a_gpu_worker_with_host_arrays_or_ring_says_nothing(caplog):
    fallbacks = []
    lane = _lane(True, fallbacks)
    with caplog.at_level("WARNING", logger="mirrorlab.backend"):
        assert lane.route("all_reduce", Impl.NCCL, np.ones(3, np.float32), "ring", None) == ("ring", None)
    assert _lane(False, fallbacks).route("all_reduce", Impl.RING, None, None, None) == (None, None)
    assert fallbacks == [] and not caplog.records


def test_a_real_cluster_asked_for_nccl_on_cpus_falls_back_and_says_so(tmp_path):
    code, out = run_launch(2, "implementation_all_reduce", ["NCCL"], MIRRORLAB_FLIGHT_RECORDER_DIR=tmp_path)
    assert code == 0, out
    code_auto, out_auto = run_launch(2, "implementation_all_reduce", ["AUTO"], MIRRORLAB_FLIGHT_RECORDER_DIR=tmp_path)
    assert code_auto == 0, out_auto
    nccl, auto = results(out), results(out_auto)
    assert [r["sum"] for r in nccl] == [r["sum"] for r in auto] and nccl[0]["start"] == auto[0]["start"]
    for worker in (0, 1):
        assert out.count(f"[worker {worker}] {NCCL_NO_GPU}") == 1, out
    assert {r["transport"] for r in nccl} == {"shm (NCCL requested without GPUs: CPU collectives, as TF's ring)"}
    assert {r["transport"] for r in auto} == {"shm"} and NCCL_NO_GPU not in out_auto

# -- GPUs per worker -----------------------------------------------------------------------------------------


def test_workers_get_consecutive_gpu_slices_wrapping_round():
    assert [gpu_slice(w, 2, 4) for w in range(3)] == [[0, 1], [2, 3], [0, 1]]
    assert [gpu_slice(w, 1, 1) for w in range(2)] == [[0], [0]]  # two workers share the host's one GPU
    assert visible_devices_for(1, 2, 4, "7, 5,3,1") == "3,1"  # through the launcher's own visible list
    envs = launch_gpu_envs(2, 1, 2, None)
    assert envs == [{GPUS_VAR: "1", VISIBLE_VAR: "0"}, {GPUS_VAR: "1", VISIBLE_VAR: "1"}]
    assert launch_gpu_envs(2, 0, 0, None) == [{}, {}]


def test_bad_gpu_requests_name_the_setting_and_the_fix():
    with pytest.raises(ValueError, match=r"--gpus-per-worker=3 but this host has 2 GPU\(s\).*Fix"):
        gpu_slice(0, 3, 2)
    with pytest.raises(ValueError, match=r"--gpus-per-worker=1 but the launcher sees no GPU.*Fix"):
        launch_gpu_envs(2, 1, 0, None)
    with pytest.raises(ValueError, match=rf"{GPUS_VAR}='two' is not a whole number.*Fix"):
        gpus_per_worker({GPUS_VAR: "two"})
    assert gpus_per_worker({GPUS_VAR: "0"}) is None and gpus_per_worker({GPUS_VAR: "2"}) == 2
    with pytest.raises(ValueError, match=rf"{GPUS_VAR}=2 but /job:worker/replica:0/task:1 sees 0 GPU.*Fix"):
        check_visible(2, 0, "/job:worker/replica:0/task:1")


def test_a_worker_told_to_use_gpus_it_does_not_see_says_which_and_how_to_fix(monkeypatch):
    if gpu_module() is not None:
        pytest.skip("this machine has GPUs")
    from mirrorlab.backend.environment import BackendEnvironment

    monkeypatch.setenv(GPUS_VAR, "1")
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, '
                                    '"task": {"type": "worker", "index": 1}}')
    with pytest.raises(ValueError, match=rf"{GPUS_VAR}=1 but /job:worker/replica:0/task:1 sees 0 GPU.*Fix: install"):
        BackendEnvironment().default_device_type()


def test_launch_refuses_gpus_on_a_machine_without_them(tmp_path):
    if gpu_module() is not None:
        pytest.skip("this machine has GPUs")
    script = tmp_path / "noop.py"
    script.write_text("")
    proc = subprocess.run([sys.executable, "-m", "mirrorlab", "launch", "--workers", "2", "--gpus-per-worker", "1",
                           str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "launcher sees no GPU" in proc.stderr

# -- the unique-id exchange over gRPC ------------------------------------------------------------------------


@pytest.fixture
def nodes():
    """Three nodes on loopback; the third holds another cluster's token."""
    addresses = [f"127.0.0.1:{p}" for p in free_ports(3)]
    names = [f"/job:worker/replica:0/task:{r}" for r in range(3)]
    made = [PeerNode(r, names, addresses, TOKEN if r < 2 else "intruder") for r in range(3)]
    exchanges = [UniqueIdExchange(node) for node in made]
    for node in made:
        node.start()
    yield exchanges
    for node in made:
        node.close()


def _soon(seconds=10.0):
    return time.monotonic() + seconds


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # the nodes only gather ids
@given(raw=st.binary(min_size=1, max_size=MAX_ID_BYTES), group=st.integers(0, 10**6))
def test_the_id_travels_as_the_same_bytes(nodes, raw, group):
    nodes[0].publish(group, raw)
    assert nodes[1].fetch(group, _soon(), lambda: None) == raw


def test_a_fetch_waits_for_rank_0_to_publish(nodes):
    threading.Timer(0.3, nodes[0].publish, args=(7, b"x" * MAX_ID_BYTES)).start()
    start = time.monotonic()
    assert nodes[1].fetch(7, _soon(), lambda: None) == b"x" * MAX_ID_BYTES
    assert time.monotonic() - start >= 0.25


def test_ids_longer_than_nccls_are_refused_both_ways(nodes):
    with pytest.raises(ValueError, match=r"has 129 bytes; it must have 1 to 128 \(NCCL_UNIQUE_ID_BYTES\)"):
        nodes[0].publish(1, b"x" * (MAX_ID_BYTES + 1))
    nodes[0].publish(1, b"y" * MAX_ID_BYTES)
    nodes[1].max_bytes = 16  # a receiver that accepts less refuses the reply before using it
    with pytest.raises(ValueError, match=r"sent by worker 0 .* has 128 bytes; it must have 1 to 16"):
        nodes[1].fetch(1, _soon(), lambda: None)


def test_only_rank_0_publishes_and_a_malformed_request_is_refused(nodes):
    with pytest.raises(ValueError, match="rank 0 makes every group's id"):
        nodes[1].publish(0, b"id")
    with pytest.raises(Exception, match="must name a collective group as at most 9 ASCII digits") as caught:
        nodes[1].node.call(0, "NcclId", b"../etc", timeout=5)
    assert caught.value.code().name == "INVALID_ARGUMENT"


def test_a_caller_without_the_cluster_token_is_refused(nodes):
    nodes[0].publish(0, b"secret id")
    with pytest.raises(errors.UnauthenticatedError, match="cluster token"):
        nodes[2].fetch(0, _soon(), lambda: None)


def test_a_fetch_ends_at_its_deadline_or_the_groups_abort(nodes):
    with pytest.raises(errors.DeadlineExceededError, match="got no NCCL unique id for collective group 5"):
        nodes[1].fetch(5, _soon(0.3), lambda: None)
    with pytest.raises(errors.UnavailableError, match="peer gone"):
        nodes[1].fetch(5, _soon(), lambda: errors.UnavailableError("peer gone"))


@given(st.binary(min_size=MAX_ID_BYTES, max_size=MAX_ID_BYTES))
def test_every_cupy_form_of_an_id_gives_the_same_bytes(raw):
    as_bytes, signed, unsigned = cupy_ids(raw)
    assert all(-128 <= b < 128 for b in signed) and all(0 <= b < 256 for b in unsigned)
    assert [id_bytes(form) for form in (as_bytes, signed, unsigned)] == [raw] * 3

# -- staging bookkeeping and the bounded wait ----------------------------------------------------------------


def test_staging_reuses_one_buffer_and_grows_by_doubling():
    sizes = []
    buffer = StagingBuffer(lambda n: sizes.append(n) or bytearray(n))
    first = buffer.host_copy(np.arange(10, dtype=np.float32))
    assert first.tolist() == list(range(10)) and first.flags.writeable
    buffer.host_copy(np.arange(6, dtype=np.int64).reshape(2, 3))  # 48 bytes: grows to twice 40
    again = buffer.host_array((4,), np.float32)
    assert sizes == [40, 80] and buffer.allocations == 2
    assert again.base is not None and np.shares_memory(again, buffer.host_array((20,), np.float32))
    assert buffer.host_copy(np.zeros((0, 3), np.float32)).shape == (0, 3)


@given(st.lists(st.integers(0, 1 << 16), min_size=1, max_size=30))
def test_staging_allocates_rarely_and_always_fits(nbytes_list):
    buffer = StagingBuffer(bytearray)
    for nbytes in nbytes_list:
        assert buffer.host_array((nbytes,), np.uint8).nbytes == nbytes
        assert buffer.capacity >= nbytes
    assert buffer.allocations <= 1 + max(nbytes_list).bit_length()


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 1.0
        return self.t


def _wait(done=lambda: False, problem=None, error=None, deadline=None, clock=time.monotonic):
    aborted = []
    try:
        wait_for_device(done, lambda: problem, lambda: error, deadline, lambda: aborted.append(1),
                        lambda text: errors.UnavailableError(f"failed: {text}"),
                        lambda: errors.DeadlineExceededError("timed out"), clock)
    except errors.OpError as exc:
        return aborted, exc
    return aborted, None


def test_device_work_that_finishes_returns_without_aborting():
    polls = iter([False, False, True])
    assert _wait(lambda: next(polls)) == ([], None)


def test_an_async_error_an_abort_or_the_deadline_abort_the_device_work_first():
    aborted, exc = _wait(problem="NCCL_ERROR_REMOTE_ERROR")
    assert aborted == [1] and isinstance(exc, errors.UnavailableError) and "REMOTE_ERROR" in exc.message
    aborted, exc = _wait(error=errors.UnavailableError("worker 1 is unavailable"))
    assert aborted == [1] and isinstance(exc, errors.UnavailableError) and exc.message == "worker 1 is unavailable"
    aborted, exc = _wait(deadline=5.0, clock=Clock())
    assert aborted == [1] and isinstance(exc, errors.DeadlineExceededError)


def test_no_new_backend_module_imports_cupy():
    """Blocked CuPy: any of these modules importing it at import time would fail here."""
    code = ("import sys\nsys.modules['cupy'] = None\n" +
            "".join(f"import mirrorlab.backend.{m}\n" for m in NEW_MODULES) +
            "import mirrorlab.collective.device_lane\nprint(sys.modules['cupy'])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stderr
    imports = "".join(f"import mirrorlab.backend.{m}\n" for m in NEW_MODULES)
    code = f"import sys\n{imports}print('cupy' in sys.modules)"  # where CuPy is installed: still not loaded
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout == "False\n"

def test_the_gpu_benchmark_skips_with_a_clear_message_without_gpus():
    if gpu_module() is not None:
        pytest.skip("this machine has GPUs")
    proc = subprocess.run([sys.executable, "bench_allreduce.py", "--gpu"], cwd=BENCHMARKS, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("GPU benchmark skipped: it needs CuPy"), proc.stderr

# -- on GPUs -------------------------------------------------------------------------------------------------


def _cupy(gpus=1):
    found = gpu_module()
    if found is None:
        pytest.skip("needs CuPy and a CUDA GPU")
    if found[1] < gpus:
        pytest.skip(f"needs {gpus} GPUs (NCCL refuses two ranks of one communicator on one GPU)")
    return found[0]


def _gpu_launch(tmp_path, program, *args):
    """(exit code, output) of ``mirrorlab launch --workers 2 --gpus-per-worker 1`` running ``program``."""
    return run_launch(2, program, args, ("--gpus-per-worker", "1"), MIRRORLAB_FLIGHT_RECORDER_DIR=tmp_path)


@pytest.mark.gpu
def test_staging_round_trip_on_a_gpu():
    cupy = _cupy()
    buffer = StagingBuffer()
    value = cupy.arange(1000, dtype=cupy.float32).reshape(10, 100)
    for _ in range(3):
        host = buffer.host_copy(value)
        np.testing.assert_array_equal(host, value.get())
    assert buffer.allocations == 1
    back = buffer.staged(lambda inst, array: array * 2)(None, value)
    assert type(back).__module__.startswith("cupy") and back.device.id == value.device.id
    np.testing.assert_array_equal(back.get(), value.get() * 2)


@pytest.mark.gpu
def test_a_real_nccl_id_crosses_grpc_intact(nodes):
    _cupy()
    from cupy.cuda import nccl

    raw = id_bytes(nccl.get_unique_id())
    nodes[0].publish(3, raw)
    assert nodes[1].fetch(3, _soon(), lambda: None) == raw and len(raw) == MAX_ID_BYTES


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["NCCL", "RING"])
def test_gpu_all_reduce_equals_the_cpu_paths_bits(impl, tmp_path):
    """Two workers, one GPU each: NCCL (or RING, staged) sums a0 + a1 per element, as the CPU ring does."""
    _cupy(gpus=2)
    code, out = _gpu_launch(tmp_path, "implementation_all_reduce", impl)
    assert code == 0, out
    code_cpu, out_cpu = run_launch(2, "implementation_all_reduce", ["AUTO"], MIRRORLAB_FLIGHT_RECORDER_DIR=tmp_path)
    assert code_cpu == 0, out_cpu
    gpu, cpu = results(out), results(out_cpu)
    assert [r["array"] for r in gpu] == ["cupy", "cupy"], out
    assert [(r["sum"], r["start"]) for r in gpu] == [(r["sum"], r["start"]) for r in cpu]


@pytest.mark.gpu
def test_a_peer_dying_during_nccl_all_reduces_ends_in_an_error_not_a_hang(tmp_path):
    _cupy(gpus=2)
    start = time.monotonic()
    code, out = _gpu_launch(tmp_path, "nccl_peer_dies")
    assert code != 0 and "[worker 0] STEP 0" in out and "[worker 0] STEP 2" not in out, out
    assert "[worker 0] mirrorlab.errors.UnavailableError" in out, out
    assert time.monotonic() - start < 60


def _instance(comm, timeout):
    return comm.start(Fingerprint("all_reduce", "float32", (1000,), "SUM"), "test", timeout)


@pytest.mark.gpu
def test_nccl_collectives_on_a_one_rank_communicator(nodes):
    """One GPU is enough for the plumbing: id, setup off-thread, the group's stream, dtypes, the wait."""
    cupy = _cupy()
    names = ["/job:worker/replica:0/task:0"]
    comm = Communicator(0, 1, names, None)
    collectives = NcclCollectives(11, nodes[0], 30.0)
    x = cupy.arange(1000, dtype=cupy.float32) / 7
    inst = _instance(comm, 30)
    np.testing.assert_array_equal(collectives.all_reduce(inst, x).get(), x.get())
    np.testing.assert_array_equal(collectives.broadcast(inst, x.astype(cupy.int64)).get(), x.astype(cupy.int64).get())
    inst.done()
    collectives.close()


@pytest.mark.gpu
def test_a_peer_that_never_joins_nccl_ends_in_a_timeout_not_a_hang(nodes):
    cupy = _cupy()
    node = nodes[0].node
    comm = Communicator(0, node.size, node.names, GrpcTransport(node, 12))
    collectives = NcclCollectives(12, nodes[0], 30.0)
    start = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="every worker to join the NCCL communicator"):
        collectives.all_reduce(_instance(comm, 3), cupy.ones(1000, cupy.float32))
    assert time.monotonic() - start < 15
    assert isinstance(comm.error, errors.DeadlineExceededError)  # the group is failed: peers are told
