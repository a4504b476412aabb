"""The gRPC transport, rendezvous and heartbeats between in-process nodes on loopback (bounded waits)."""

import shutil
import subprocess
import threading
import time

import grpc
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from mirrorlab import errors
from mirrorlab.backend import wire
from mirrorlab.backend.grpc_transport import RANK_KEY, SERVICE, TOKEN_KEY, GrpcTransport, PeerNode
from mirrorlab.backend.liveness import Heartbeats
from mirrorlab.backend.ports import free_ports
from mirrorlab.backend.rendezvous import Rendezvous, WorkerFacts
from mirrorlab.backend.tls import TlsFiles
from mirrorlab.collective.allreduce_ring import allreduce_ring
from mirrorlab.collective.communicator import Communicator
from mirrorlab.collective.message import Fingerprint, Header, Message

TOKEN = "s3cret"


def facts(rank, devices=1, version="0.1.0"):
    return WorkerFacts(version, '{"worker": []}', f"/job:worker/replica:0/task:{rank}", devices, 1)


class Cluster:
    """``n`` started nodes on loopback; ``tokens``/``devices`` per rank; closes them all afterwards."""

    def __init__(self, n, tokens=None, devices=None, versions=None, heartbeat=None, tls=None):
        addresses = [f"127.0.0.1:{p}" for p in free_ports(n)]
        names = [f"/job:worker/replica:0/task:{r}" for r in range(n)]
        self.nodes = [PeerNode(r, names, addresses, (tokens or [TOKEN] * n)[r], tls=(tls or [None] * n)[r])
                      for r in range(n)]
        self.rendezvous = [Rendezvous(node, facts(r, (devices or [1] * n)[r], (versions or ["0.1.0"] * n)[r]))
                           for r, node in enumerate(self.nodes)]
        self.heartbeats = [Heartbeats(node, heartbeat, lambda: "in test") for node in self.nodes] if heartbeat else []
        for node in self.nodes:
            node.start()

    def all(self, fn):
        """Run ``fn(rank)`` on one thread per rank; returns each result or exception."""
        out = [None] * len(self.nodes)

        def main(r):
            try:
                out[r] = fn(r)
            except BaseException as exc:  # noqa: BLE001 - the test inspects it
                out[r] = exc

        threads = [threading.Thread(target=main, args=(r,), daemon=True) for r in range(len(self.nodes))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a node hung"
        return out

    def close(self):
        for hb in self.heartbeats:
            hb.stop()
        self.all(lambda r: self.nodes[r].close())


@pytest.fixture
def cluster_factory():
    made = []

    def make(*args, **kwargs):
        made.append(Cluster(*args, **kwargs))
        return made[-1]

    yield make
    for cluster in made:
        cluster.close()


def test_ring_all_reduce_runs_unchanged_over_grpc(cluster_factory):
    c = cluster_factory(3)
    assert c.all(lambda r: c.rendezvous[r].wait(10)) == [None] * 3
    inputs = [np.arange(10, dtype=np.float32) * (r + 1) + 0.1 for r in range(3)]

    def reduce(r):
        comm = Communicator(r, 3, c.nodes[r].names, GrpcTransport(c.nodes[r], 0))
        inst = comm.start(Fingerprint("all_reduce", "float32", (10,), "SUM"), "test", timeout=10)
        result = allreduce_ring(inst, inputs[r])
        inst.done()
        return result

    results = c.all(reduce)
    assert all(res.tobytes() == results[0].tobytes() for res in results)
    np.testing.assert_allclose(results[0], sum(inputs), rtol=1e-6)


def test_a_tensor_larger_than_a_grpc_message_streams_in_pieces(cluster_factory):
    c = cluster_factory(2)
    big = np.arange(3 * wire.CHUNK_BYTES // 8, dtype=np.float64)  # 3 MiB: three pieces
    header = Header(1, Fingerprint("broadcast", "float64", big.shape, "root 0"), 0, 0, "test")
    GrpcTransport(c.nodes[0], 0).send(1, Message(header, big))
    got = GrpcTransport(c.nodes[1], 0).recv(0, time.monotonic() + 20)
    assert got.header == header and got.payload.tobytes() == big.tobytes()


def test_a_taken_port_is_named_with_the_fix(cluster_factory):
    c = cluster_factory(2)
    twin = PeerNode(0, c.nodes[0].names, c.nodes[0].addresses, TOKEN)
    with pytest.raises(errors.UnavailableError, match="could not listen on 127.0.0.1:.*same task index"):
        twin.start()


def test_device_count_mismatch_fails_both_sides_with_one_message(cluster_factory):
    c = cluster_factory(2, devices=[1, 2])
    out = c.all(lambda r: c.rendezvous[r].wait(10))
    for exc in out:
        assert isinstance(exc, errors.FailedPreconditionError)
        assert "worker 1 (/job:worker/replica:0/task:1) has 2 devices, worker 0 (/job:worker/replica:0/task:0) " \
               "has 1 devices" in str(exc)


def test_version_mismatch_names_both_versions(cluster_factory):
    c = cluster_factory(2, versions=["0.1.0", "0.0.9"])
    out = c.all(lambda r: c.rendezvous[r].wait(10))
    assert all("worker 1 (/job:worker/replica:0/task:1) runs mirrorlab 0.0.9, worker 0" in str(e) for e in out)


def test_wrong_token_is_refused_on_both_sides(cluster_factory):
    c = cluster_factory(2, tokens=[TOKEN, "other"])
    out = c.all(lambda r: c.rendezvous[r].wait(10))
    for exc in out:
        assert isinstance(exc, errors.UnauthenticatedError), exc
        assert "cluster token (MIRRORLAB_CLUSTER_TOKEN) is not this cluster's" in str(exc)


def test_missing_peer_ends_rendezvous_with_its_name_and_address(cluster_factory):
    c = cluster_factory(2)
    c.nodes[1]._server.stop(0).wait()
    started = time.monotonic()
    with pytest.raises(errors.UnavailableError) as info:
        c.rendezvous[0].wait(0.8)
    assert time.monotonic() - started < 5
    assert f"worker 1 (/job:worker/replica:0/task:1 at {c.nodes[1].addresses[1]})" in str(info.value)
    assert "MIRRORLAB_RENDEZVOUS_TIMEOUT" in str(info.value)


def test_abort_wakes_a_peer_blocked_in_recv_and_deadlines_hold(cluster_factory):
    c = cluster_factory(2)
    c.all(lambda r: c.rendezvous[r].wait(10))
    t0, t1 = GrpcTransport(c.nodes[0], 0), GrpcTransport(c.nodes[1], 0)
    with pytest.raises(errors.DeadlineExceededError):
        t0.recv(1, time.monotonic() + 0.3)
    threading.Timer(0.3, lambda: t1.abort(errors.InternalError("boom on worker 1"))).start()
    with pytest.raises(errors.InternalError, match="Collective ops is aborted by: boom on worker 1"):
        t0.recv(1, time.monotonic() + 10)
    assert GrpcTransport(c.nodes[0], 1).abort_error is None  # other groups unaffected


def test_a_broken_connection_waits_for_the_abort_notice_that_names_the_cause(cluster_factory):
    """Worker 0 failed on worker 1's error and exited: its connection to worker 2 breaks, and worker 1's notice,
    arriving a moment later on another connection, still names the cause on worker 2."""
    c = cluster_factory(3)
    c.all(lambda r: c.rendezvous[r].wait(10))
    c.nodes[2].peer_lost(0, "the data lane from it broke (test)", grace=0.5)
    threading.Timer(0.1, lambda: GrpcTransport(c.nodes[1], 0).abort(errors.InternalError("boom on worker 1"))).start()
    with pytest.raises(errors.InternalError, match="Collective ops is aborted by: boom on worker 1"):
        c.nodes[2].recv(0, 0, time.monotonic() + 10)

    lone = cluster_factory(2)  # without a notice, the lost peer is named once the grace is over
    lone.all(lambda r: lone.rendezvous[r].wait(10))
    started = time.monotonic()
    lone.nodes[1].peer_lost(0, "the data lane from it broke (test)", grace=0.3)
    with pytest.raises(errors.UnavailableError, match="the data lane from it broke"):
        lone.nodes[1].recv(0, 0, time.monotonic() + 10)
    assert 0.25 < time.monotonic() - started < 5


def test_malformed_frame_is_refused_and_the_server_keeps_serving(cluster_factory):
    c = cluster_factory(2)
    node = c.nodes[0]
    send = grpc.insecure_channel(node.addresses[0]).stream_unary(f"/{SERVICE}/Send")
    meta = ((TOKEN_KEY, TOKEN), (RANK_KEY, "1"))
    with pytest.raises(grpc.RpcError) as info:
        send(iter([b"MLW1garbage"]), metadata=meta, timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "refused a frame" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        send(iter([b"anything"]), metadata=((TOKEN_KEY, "wrong"), (RANK_KEY, "1")), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    header = Header(1, Fingerprint("barrier"), 0, 1, "test")
    send(iter(wire.split(wire.encode_message(0, Message(header, np.ones(3, np.int32))))), metadata=meta, timeout=5)
    assert node.recv(0, 1, time.monotonic() + 5).payload.tolist() == [1, 1, 1]


def test_a_silent_peer_is_named_within_the_heartbeat_timeout(cluster_factory):
    c = cluster_factory(2, heartbeat=0.5)
    c.all(lambda r: c.rendezvous[r].wait(10))
    c.heartbeats[0].start()
    c.nodes[1]._server.stop(0).wait()  # as if killed: no goodbye
    started = time.monotonic()
    with pytest.raises(errors.UnavailableError) as info:
        c.nodes[0].recv(0, 1, time.monotonic() + 10)
    assert time.monotonic() - started < 3
    assert "worker 1 (/job:worker/replica:0/task:1 at" in str(info.value)
    assert "has not answered heartbeats for 0.5 s" in str(info.value)


def _certificates(folder, name, ca=None):
    """A test CA (when ``ca`` is None) or a leaf certificate for 127.0.0.1 signed by ``ca``, made with openssl."""
    key, cert = folder / f"{name}.key", folder / f"{name}.pem"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key)]
    if ca is None:
        subprocess.run(["openssl", "req", "-x509", *ec, "-out", str(cert), "-days", "1", "-subj", f"/CN={name}"],
                       check=True, capture_output=True, timeout=30)
    else:
        csr, ext = folder / f"{name}.csr", folder / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1\n")
        subprocess.run(["openssl", "req", *ec, "-out", str(csr), "-subj", f"/CN={name}"], check=True,
                       capture_output=True, timeout=30)
        subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[1]), "-CAkey", str(ca[0]),
                        "-CAcreateserial", "-out", str(cert), "-days", "1", "-extfile", str(ext)], check=True,
                       capture_output=True, timeout=30)
    return key, cert


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make test certificates")
def test_mutual_tls_carries_collectives_and_refuses_a_foreign_certificate(cluster_factory, tmp_path):
    ca, other_ca = _certificates(tmp_path, "ca"), _certificates(tmp_path, "other-ca")
    files = []
    for name, signer in (("w0", ca), ("w1", ca), ("stranger", other_ca)):
        key, cert = _certificates(tmp_path, name, signer)
        env = {"MIRRORLAB_TLS_CERT": str(cert), "MIRRORLAB_TLS_KEY": str(key), "MIRRORLAB_TLS_CA": str(signer[1])}
        files.append(TlsFiles.from_environ(env))
    c = cluster_factory(2, tls=files[:2])
    assert c.all(lambda r: c.rendezvous[r].wait(10)) == [None, None]
    header = Header(1, Fingerprint("barrier"), 0, 0, "test")
    GrpcTransport(c.nodes[0], 0).send(1, Message(header, np.arange(4)))
    assert GrpcTransport(c.nodes[1], 0).recv(0, time.monotonic() + 10).payload.tolist() == [0, 1, 2, 3]
    mixed = cluster_factory(2, tls=[files[0], files[2]])  # a certificate from another CA never gets in
    out = mixed.all(lambda r: mixed.rendezvous[r].wait(1.0))
    assert all(isinstance(e, errors.UnavailableError) and "MIRRORLAB_TLS_CA" in str(e) for e in out), out


def test_tls_settings_need_all_three_files(tmp_path):
    with pytest.raises(ValueError, match="not set: MIRRORLAB_TLS_KEY, MIRRORLAB_TLS_CA"):
        TlsFiles.from_environ({"MIRRORLAB_TLS_CERT": "c.pem"})
    with pytest.raises(ValueError, match="MIRRORLAB_TLS_CERT=.*cannot be read"):
        TlsFiles.from_environ({name: str(tmp_path / "missing.pem") for name in
                               ("MIRRORLAB_TLS_CERT", "MIRRORLAB_TLS_KEY", "MIRRORLAB_TLS_CA")})
    assert TlsFiles.from_environ({}) is None


@pytest.fixture(scope="module")
def lone_node():
    """One started node (rank 0 of 2) that a test feeds frames to directly."""
    names = [f"/job:worker/replica:0/task:{r}" for r in range(2)]
    node = PeerNode(0, names, [f"127.0.0.1:{p}" for p in free_ports(2)], TOKEN)
    node.start()
    yield node
    node._closing = True
    node._server.stop(0).wait()


@settings(max_examples=25, deadline=None)
@given(junk=st.lists(st.binary(max_size=64), min_size=1, max_size=3) | st.integers(1, 60).map(
    lambda cut: [wire.encode_message(0, Message(Header(1, Fingerprint("barrier"), 0, 1, "t"), np.ones(4)))[:cut]]))
def test_random_and_truncated_frames_get_an_error_reply_and_the_server_keeps_serving(lone_node, junk):
    meta = ((TOKEN_KEY, TOKEN), (RANK_KEY, "1"))
    items = [b"\x01" + j for j in junk]  # last-piece flag, so each item is decoded as a whole frame
    header = Header(7, Fingerprint("barrier"), 0, 1, "t")
    with grpc.insecure_channel(lone_node.addresses[0]) as channel:
        send = channel.stream_unary(f"/{SERVICE}/Send")
        with pytest.raises(grpc.RpcError) as info:
            send(iter(items), metadata=meta, timeout=5)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "refused a frame" in info.value.details()
        send(iter(wire.split(wire.encode_message(3, Message(header, np.arange(2))))), metadata=meta, timeout=5)
    assert lone_node.recv(3, 1, time.monotonic() + 5).header == header
