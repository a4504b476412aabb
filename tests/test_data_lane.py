"""The gRPC path's TCP data lanes between in-process nodes on loopback: results bit-identical to the plain gRPC
path and the simulator, FIFO per pair, clients without the cluster token dropped before any data is read,
oversized or inconsistent frames refused, a lane that breaks fails the node as a broken stream does. Every wait
is bounded."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shm_workers
from test_backend_transport import Cluster, _certificates
from mirrorlab import errors
from mirrorlab.backend import data_lane, lane_auth, wire
from mirrorlab.backend.data_lane import DataLanes
from mirrorlab.backend.grpc_transport import GrpcTransport, PeerNode
from mirrorlab.backend.lane_tls import lane_contexts
from mirrorlab.backend.settings import BackendSettings, data_lane_setting, port_setting
from mirrorlab.backend.tls import TlsFiles
from mirrorlab.backend.ports import free_ports
from mirrorlab.collective.allreduce_ring import allreduce_ring
from mirrorlab.collective.communicator import Communicator
from mirrorlab.collective.message import Fingerprint, Header, Message
from mirrorlab.sim import SimCluster

TOKEN = "lane-s3cret"


class Nodes:
    """``n`` started nodes on loopback, with data lanes unless ``lanes`` is False; ``close`` stops them all
    (bounded)."""

    def __init__(self, n: int, lanes: bool = True, limits: wire.WireLimits = wire.WireLimits()) -> None:
        addresses = [f"127.0.0.1:{p}" for p in free_ports(n)]
        self.names = [f"/job:worker/replica:0/task:{r}" for r in range(n)]
        self.nodes = [PeerNode(r, self.names, addresses, TOKEN, limits=limits) for r in range(n)]
        self.lanes = [DataLanes(node, TOKEN) for node in self.nodes] if lanes else []
        for node in self.nodes:
            node.start()
        assert self.all(lambda r: self.lanes[r].open(10)) == [[p for p in range(n) if p != r] for r in range(n)] \
            if lanes else True

    all = Cluster.all  # fn(rank) on one thread per rank; each result (or the exception it raised)

    def close(self):
        self.all(lambda r: self.nodes[r].close())


@pytest.fixture
def make_nodes():
    made: list[Nodes] = []

    def make(*args, **kwargs):
        made.append(Nodes(*args, **kwargs))
        return made[-1]

    yield make
    for nodes in made:
        nodes.close()


def _message(sender: int, payload: np.ndarray, seq: int = 1, site: str = "t") -> Message:
    return Message(Header(seq, Fingerprint("all_reduce", str(payload.dtype), payload.shape), 0, sender, site), payload)


def _ring(nodes: Nodes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    def reduce(r):
        comm = Communicator(r, len(inputs), nodes.names, GrpcTransport(nodes.nodes[r], 0))
        inst = comm.start(Fingerprint("all_reduce", str(inputs[r].dtype), inputs[r].shape, "SUM"), "test", 30)
        result = allreduce_ring(inst, inputs[r])
        inst.done()
        return result
    return nodes.all(reduce)


@pytest.fixture(scope="module")
def lane_and_plain():
    """Per cluster size (2, 3): nodes with lanes and nodes without, shared by the property tests' examples."""
    made = {n: (Nodes(n), Nodes(n, lanes=False)) for n in (2, 3)}
    yield made
    for pair in made.values():
        for nodes in pair:
            nodes.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workers=st.sampled_from([2, 3]), dtype=st.sampled_from(["float32", "float64", "int32", "int64", "float16"]),
       length=st.integers(0, 40000), seed=st.integers(0, 2**16))
def test_ring_results_over_lanes_are_bit_identical_to_the_plain_grpc_path(lane_and_plain, workers, dtype, length,
                                                                          seed):
    rng = np.random.default_rng(seed)
    inputs = [(rng.standard_normal(length) * 1000).astype(dtype) for _ in range(workers)]
    lanes, plain = lane_and_plain[workers]
    for got, expected in zip(_ring(lanes, inputs), _ring(plain, inputs)):
        assert not isinstance(got, BaseException), got
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("size", [2, 3])
def test_every_algorithm_over_lanes_equals_the_simulator_bit_for_bit(make_nodes, size):
    nodes = make_nodes(size)
    got = nodes.all(lambda r: shm_workers.run_cases(Communicator(r, size, nodes.names,
                                                                 GrpcTransport(nodes.nodes[r], 0)), seed=0))

    def program():
        import mirrorlab.tf as tf
        return shm_workers.run_cases(tf.distribute.MultiWorkerMirroredStrategy().extended._group.comm, seed=0)
    simulated = SimCluster(workers=size, seed=3).run(program).values()
    for rank in range(size):
        assert not isinstance(got[rank], BaseException), got[rank]
        for key, expected in simulated[rank].items():
            assert got[rank][key].dtype == expected.dtype and got[rank][key].tobytes() == expected.tobytes(), key


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sends=st.lists(st.tuples(st.sampled_from([0, 3, 100, 5000, 300_000]), st.sampled_from([5, 6])),
                      min_size=1, max_size=12))
def test_small_and_large_messages_of_several_groups_arrive_in_send_order(lane_and_plain, sends):
    lanes = lane_and_plain[2][0]
    sent = [(group, np.arange(n, dtype=np.int32) + k) for k, (n, group) in enumerate(sends)]
    for k, (group, payload) in enumerate(sent):
        GrpcTransport(lanes.nodes[0], group).send(1, _message(0, payload, seq=k))
    for k, (group, payload) in enumerate(sent):
        got = GrpcTransport(lanes.nodes[1], group).recv(0, time.monotonic() + 20)
        assert got.header.seq == k and got.payload.tobytes() == payload.tobytes()


def test_a_payload_changed_after_send_arrives_as_it_was_sent(make_nodes):
    nodes = make_nodes(2)
    payload = np.arange(1 << 20, dtype=np.float32)
    GrpcTransport(nodes.nodes[0], 0).send(1, _message(0, payload))
    payload[:] = -1
    got = GrpcTransport(nodes.nodes[1], 0).recv(0, time.monotonic() + 20)
    assert got.payload.tobytes() == np.arange(1 << 20, dtype=np.float32).tobytes()


def _handshake_client(port: int, answer: bytes) -> tuple[bytes, bytes]:
    """Connect to a lane port, take its challenge, send ``answer`` plus data; what the port said back after."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        hello = lane_auth.recv_exactly(sock, lane_auth.HELLO_BYTES, 10)
        sock.sendall(answer + b"x" * 100_000)
        sock.settimeout(10)
        try:
            rest = sock.recv(100)
        except ConnectionResetError:
            rest = b"<reset>"
        return hello, rest


@pytest.mark.parametrize("answer", [
    b"MLL1" + (1).to_bytes(4, "big") + bytes(64),  # right form, wrong proof (no token)
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(45),  # something else entirely
    b"MLL1" + (0).to_bytes(4, "big") + bytes(64),  # claims the listener's own rank
])
def test_a_lane_client_without_the_token_is_dropped_before_any_data_is_read(make_nodes, answer, caplog):
    nodes = make_nodes(2)
    hello, rest = _handshake_client(nodes.lanes[0].port, answer)
    assert hello.startswith(b"MLL1") and rest in (b"", b"<reset>")  # no proof back: the connection just ends
    assert len(nodes.lanes[0].refused) == 1 and "refused a data-lane client" in caplog.text
    assert nodes.lanes[0]._incoming.keys() == {1}  # only the real peer's lane is registered


def test_a_lane_client_signed_with_another_token_is_refused(make_nodes):
    nodes = make_nodes(2)
    with socket.create_connection(("127.0.0.1", nodes.lanes[0].port), timeout=10) as sock:
        with pytest.raises(lane_auth.LaneAuthError, match="refused this worker's data lane"):
            lane_auth.answer_challenge(sock, "another token", 1, 0, 10)
    assert len(nodes.lanes[0].refused) == 1


def test_a_lane_port_without_the_token_is_not_trusted():
    listener = socket.create_server(("127.0.0.1", 0))
    def impostor():
        sock, _ = listener.accept()
        with sock:
            sock.sendall(b"MLL1" + bytes(32))
            lane_auth.recv_exactly(sock, lane_auth.ANSWER_BYTES, 10)
            sock.sendall(bytes(32))
    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    with listener, socket.create_connection(listener.getsockname(), timeout=10) as sock:
        with pytest.raises(lane_auth.LaneAuthError, match="answered without this cluster's token"):
            lane_auth.answer_challenge(sock, TOKEN, 1, 0, 10)
    thread.join(10)


def test_a_silent_lane_client_is_dropped_after_the_handshake_timeout(make_nodes, monkeypatch):
    monkeypatch.setattr(data_lane, "HANDSHAKE_TIMEOUT_S", 0.5)
    nodes = make_nodes(2)
    with socket.create_connection(("127.0.0.1", nodes.lanes[0].port), timeout=10) as sock:
        start = time.monotonic()
        sock.settimeout(10)
        received = b""
        while chunk := sock.recv(100):
            received += chunk
        assert len(received) == lane_auth.HELLO_BYTES and time.monotonic() - start < 5
    assert "0.5 s passed" in nodes.lanes[0].refused[0]


@pytest.mark.parametrize("head_change, refusal", [
    ({"lane": 1 << 40, "shape": [1 << 38]}, "exceeds the limit"),
    ({"lane": 12}, "needs 16 on the lane"),
    ({"lane": True}, "declares True"),
])
def test_lane_headers_beyond_the_limits_or_inconsistent_are_refused(head_change, refusal):
    message = _message(0, np.ones(4, np.float32))
    head, payload = wire.lane_parts(3, message)
    frame = wire.decode(head)
    assert frame.lane_bytes == 16 and frame.layout == ("float32", (4,)) and frame.message.payload is None
    assert wire.with_lane_payload(frame, payload.tobytes()).message.payload.tobytes() == payload.tobytes()
    text = json.loads(head[8:])
    text.update(head_change)
    body = json.dumps(text).encode()
    with pytest.raises(wire.WireError, match=refusal):
        wire.decode(wire.MAGIC + len(body).to_bytes(4, "big") + body)


def test_a_lane_frame_carrying_its_payload_inline_is_refused():
    head, payload = wire.lane_parts(0, _message(0, np.ones(4, np.float32)))
    with pytest.raises(wire.WireError, match="carries 16 inline"):
        wire.decode(head + payload.tobytes())


def test_an_oversized_lane_payload_is_refused_before_it_is_read(make_nodes):
    nodes = make_nodes(2, limits=wire.WireLimits(max_bytes=1 << 20))
    GrpcTransport(nodes.nodes[0], 0).send(1, _message(0, np.zeros(1 << 19, np.float32)))  # 2 MiB, limit 1 MiB
    with pytest.raises(errors.UnavailableError, match=r"malformed frame on its data lane \(data-lane payload of "
                                                      r"2097152 bytes exceeds the limit of 1048576 bytes\)"):
        GrpcTransport(nodes.nodes[1], 0).recv(0, time.monotonic() + 20)
    assert nodes.nodes[1]._boxes == {}


def test_an_oversized_lane_header_is_refused_before_it_is_read(make_nodes):
    nodes = make_nodes(2)
    lane = nodes.nodes[0].lanes._outgoing[1]
    lane.sock.sendall(wire.MAGIC + (1 << 20).to_bytes(4, "big"))  # a header of 1 MiB; the limit is 64 KiB
    with pytest.raises(errors.UnavailableError, match="frame header of 1048576 bytes exceeds the limit of 65536"):
        GrpcTransport(nodes.nodes[1], 0).recv(0, time.monotonic() + 20)


def test_a_lane_frame_on_the_grpc_stream_is_refused(make_nodes):
    nodes = make_nodes(2, lanes=False)
    head, _ = wire.lane_parts(0, _message(0, np.ones(4, np.float32)))
    nodes.nodes[0].send_frame(1, head)
    with pytest.raises(errors.UnavailableError, match="INVALID_ARGUMENT.*data-lane frame .* on the gRPC stream"):
        GrpcTransport(nodes.nodes[0], 0).recv(1, time.monotonic() + 20)


def test_a_lane_that_breaks_mid_message_fails_the_receiver_naming_the_sender(make_nodes):
    nodes = make_nodes(2)
    head, _ = wire.lane_parts(0, _message(0, np.ones(1 << 20, np.float32)))
    lane = nodes.nodes[0].lanes._outgoing[1]
    lane.sock.sendall(head + bytes(1000))  # the header promises 4 MiB; the lane carries 1000 bytes and dies
    lane.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    lane.sock.close()  # linger 0: a reset, as from a killed process
    with pytest.raises(errors.UnavailableError) as caught:
        GrpcTransport(nodes.nodes[1], 0).recv(0, time.monotonic() + 20)
    text = str(caught.value)
    assert "worker 0 (/job:worker/replica:0/task:0 at 127.0.0.1:" in text
    assert "the data lane from it broke" in text and "after 1000 of 4194304 bytes" in text


def test_a_goodbye_on_the_lane_comes_after_every_message(make_nodes):
    nodes = make_nodes(2)
    payloads = [np.full(n, n, np.float64) for n in (10, 1 << 20, 7)]
    for k, payload in enumerate(payloads):
        GrpcTransport(nodes.nodes[0], 0).send(1, _message(0, payload, seq=k))
    nodes.nodes[0].close()
    receiver = GrpcTransport(nodes.nodes[1], 0)
    assert [receiver.recv(0, time.monotonic() + 20).payload.tobytes() for _ in payloads] == \
        [p.tobytes() for p in payloads]
    with pytest.raises(errors.UnavailableError, match="finished its program"):
        receiver.recv(0, time.monotonic() + 20)


def test_the_setting_names_the_variable_and_the_fix():
    assert data_lane_setting({}) == "auto" and data_lane_setting({"MIRRORLAB_DATA_LANE": "on"}) == "on"
    with pytest.raises(ValueError, match=r"MIRRORLAB_DATA_LANE='yes' is not one of auto, on, off\. Fix"):
        data_lane_setting({"MIRRORLAB_DATA_LANE": "yes"})


def test_the_connect_timeout_setting_names_the_variable_and_the_fix():
    token = {"MIRRORLAB_CLUSTER_TOKEN": "t"}
    assert BackendSettings.from_environ(token).data_lane_connect_timeout == 10.0
    assert BackendSettings.from_environ({**token, "MIRRORLAB_DATA_LANE_CONNECT_TIMEOUT": "1.5"}) \
        .data_lane_connect_timeout == 1.5
    with pytest.raises(ValueError, match=r"MIRRORLAB_DATA_LANE_CONNECT_TIMEOUT='soon' is not a positive number of "
                                         r"seconds\. Fix: e\.g\. MIRRORLAB_DATA_LANE_CONNECT_TIMEOUT=10"):
        BackendSettings.from_environ({**token, "MIRRORLAB_DATA_LANE_CONNECT_TIMEOUT": "soon"})


def test_a_peer_whose_lane_cannot_connect_in_time_stays_on_grpc_and_is_named(make_nodes, monkeypatch, caplog):
    both = threading.Barrier(2, timeout=5)

    def refuse(address, timeout):  # as a firewall that drops the port; both connects must be in flight at once
        both.wait()  # (one after the other, the first would break the barrier after 5 s)
        raise TimeoutError("timed out")

    nodes = make_nodes(3, lanes=False)
    lanes = [DataLanes(node, TOKEN, connect_timeout=0.5) for node in nodes.nodes]
    monkeypatch.setattr(data_lane.socket, "create_connection", refuse)
    with caplog.at_level("WARNING", logger="mirrorlab.backend"):
        assert lanes[0].open(5) == []
    assert [r.getMessage().split(" after ")[0].split("no data lane to ")[1].split(" (")[0] for r in caplog.records] \
        == ["worker 1", "worker 2"]
    assert all(f"TCP port {lanes[peer].port} of that worker's host" in r.getMessage()
               for peer, r in zip((1, 2), caplog.records))
    assert "(TimeoutError: timed out)" in caplog.records[0].getMessage()  # not the barrier's BrokenBarrierError


@pytest.mark.parametrize("mode, tls, lanes", [("auto", False, True), ("auto", True, False), ("on", True, True),
                                              ("off", False, False)])
def test_auto_uses_lanes_without_tls_only(mode, tls, lanes):
    files = TlsFiles(b"cert", b"key", b"ca") if tls else None
    assert BackendSettings("token", tls=files, data_lane=mode).uses_data_lanes is lanes


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make test certificates")
def test_lanes_under_mutual_tls_carry_messages_and_refuse_a_foreign_certificate(tmp_path):
    ca, other_ca = _certificates(tmp_path, "ca"), _certificates(tmp_path, "other-ca")
    contexts = {}
    for name, signer in (("w0", ca), ("w1", ca), ("stranger", other_ca)):
        key, cert = _certificates(tmp_path, name, signer)
        env = {"MIRRORLAB_TLS_CERT": str(cert), "MIRRORLAB_TLS_KEY": str(key), "MIRRORLAB_TLS_CA": str(signer[1])}
        contexts[name] = lane_contexts(TlsFiles.from_environ(env))
    addresses = [f"127.0.0.1:{p}" for p in free_ports(2)]
    names = ["/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    nodes = [PeerNode(r, names, addresses, TOKEN) for r in range(2)]
    lanes = [DataLanes(node, TOKEN, tls=contexts[name]) for node, name in zip(nodes, ("w0", "w1"))]
    for node in nodes:
        node.start()
    try:
        assert lanes[0].open(10) == [1] and lanes[1].open(10) == [0]
        payload = np.arange(1 << 18, dtype=np.float64)
        GrpcTransport(nodes[0], 0).send(1, _message(0, payload))
        assert GrpcTransport(nodes[1], 0).recv(0, time.monotonic() + 10).payload.tobytes() == payload.tobytes()
        stranger = contexts["stranger"][1]
        with socket.create_connection(("127.0.0.1", lanes[0].port), timeout=10) as raw:
            with pytest.raises(ssl.SSLError):
                with stranger.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                    lane_auth.answer_challenge(sock, TOKEN, 1, 0, 10)
    finally:
        for node in nodes:
            node.close()


@pytest.mark.parametrize("host, bind_host", [("127.0.0.3", None), ("127.0.0.1", "127.0.0.4")])
def test_the_lane_listens_exactly_where_the_grpc_server_binds(host, bind_host):
    node = PeerNode(0, ["/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"],
                    [f"{host}:{free_ports(1)[0]}", "127.0.0.1:1"], TOKEN, bind_host=bind_host)
    lanes = DataLanes(node, TOKEN)
    try:
        assert lanes._listener.getsockname() == (bind_host or host, lanes.port)
    finally:
        lanes.close()


def test_a_fixed_lane_port_is_used_and_a_taken_one_names_the_variable_and_the_fix():
    assert port_setting({}, "MIRRORLAB_DATA_LANE_PORT") == 0
    with pytest.raises(ValueError, match=r"MIRRORLAB_DATA_LANE_PORT='70000' is not a TCP port \(0-65535\)\. Fix"):
        port_setting({"MIRRORLAB_DATA_LANE_PORT": "70000"}, "MIRRORLAB_DATA_LANE_PORT")
    wanted = free_ports(1)[0]
    assert BackendSettings.from_environ({"MIRRORLAB_CLUSTER_TOKEN": TOKEN,
                                         "MIRRORLAB_DATA_LANE_PORT": str(wanted)}).data_lane_port == wanted
    names = ["/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    first = PeerNode(0, names, [f"127.0.0.1:{free_ports(1)[0]}", "127.0.0.1:1"], TOKEN)
    second = PeerNode(0, names, [f"127.0.0.1:{free_ports(1)[0]}", "127.0.0.1:1"], TOKEN)
    lanes = DataLanes(first, TOKEN, port=wanted)
    try:
        assert lanes.port == wanted
        with pytest.raises(errors.UnavailableError, match=rf"could not listen for data lanes on 127\.0\.0\.1:{wanted}"
                                                          r".*Fix: set MIRRORLAB_DATA_LANE_PORT to a free port"):
            DataLanes(second, TOKEN, port=wanted)
    finally:
        lanes.close()
        first.close()
        second.close()
