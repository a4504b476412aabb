"""gRPC keepalive: the backend's client and server settings (backend/keepalive.py) agree, the liveness lint's
keepalive codes (ML-LIVE-005, ML-LIVE-006, and keepalive's place in ML-LIVE-001's order), and a real loopback server
that answers a too-eager client with GOAWAY "too_many_pings" exactly when the lint says it will."""

from __future__ import annotations

import queue
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from mirrorlab.backend.keepalive import Keepalive
from mirrorlab.backend.settings import BackendSettings
from mirrorlab.diagnostics.liveness_lint import check_keepalive, check_timeouts

OURS = Keepalive.for_heartbeat(5.0)


def _codes(findings: list) -> list[str]:
    return [f.code for f in findings]


def test_the_backends_own_keepalive_passes_the_lint() -> None:
    assert check_keepalive("worker:0", OURS.client_options(), OURS.server_options()) == []
    assert check_timeouts("worker:0", 0.2, environ={"MIRRORLAB_HEARTBEAT_TIMEOUT": "1"}) == []  # 0.5 s floor
    assert OURS.time_s < 5.0 <= OURS.timeout_s  # pings within the heartbeat window, never gives up before it


def test_a_client_pinging_faster_than_the_server_allows_is_goaway() -> None:
    interval, permission = check_keepalive("worker:0", OURS.client_options(), [])  # a server at gRPC's defaults
    assert interval.code == permission.code == "ML-LIVE-005"
    assert "server accepts pings only 300000 ms apart" in interval.message and "permit" in permission.message
    lenient = [("grpc.http2.min_ping_interval_without_data_ms", 100), ("grpc.keepalive_permit_without_calls", 1)]
    assert check_keepalive("worker:0", OURS.client_options(), lenient) == []
    never_strikes = [("grpc.http2.max_ping_strikes", 0)]
    assert check_keepalive("worker:0", OURS.client_options(), never_strikes) == []


def test_pings_between_calls_need_the_servers_permission() -> None:
    strict = [("grpc.http2.min_ping_interval_without_data_ms", 100), ("grpc.keepalive_permit_without_calls", 0)]
    [finding] = check_keepalive("worker:0", OURS.client_options(), strict)
    assert finding.code == "ML-LIVE-005" and "does not permit it" in finding.message
    only_during_calls = [o for o in OURS.client_options() if o[0] != "grpc.keepalive_permit_without_calls"]
    assert check_keepalive("worker:0", only_during_calls, strict) == []


def test_a_client_without_keepalive_or_one_that_stops_pinging_is_named() -> None:
    [off] = check_keepalive("worker:0", [], OURS.server_options())
    assert off.code == "ML-LIVE-006" and "keepalive is off" in off.message
    stops = [*OURS.client_options()[:3], ("grpc.http2.max_pings_without_data", 2)]
    [finding] = check_keepalive("worker:0", stops, OURS.server_options())
    assert finding.code == "ML-LIVE-006" and "stops pinging after 2 pings" in finding.message


@pytest.mark.parametrize("environ, collective, words", [
    ({"MIRRORLAB_KEEPALIVE_TIME": "8", "MIRRORLAB_KEEPALIVE_TIMEOUT": "10"}, None,
     "the gRPC keepalive interval (MIRRORLAB_KEEPALIVE_TIME = 8 s) is not below MIRRORLAB_HEARTBEAT_TIMEOUT (5 s)"),
    ({"MIRRORLAB_KEEPALIVE_TIMEOUT": "1"}, None,
     "the gRPC keepalive timeout (MIRRORLAB_KEEPALIVE_TIMEOUT = 1 s) is below MIRRORLAB_HEARTBEAT_TIMEOUT (5 s)"),
    ({"MIRRORLAB_KEEPALIVE_TIMEOUT": "20"}, 10.0,
     "CommunicationOptions.timeout_seconds (10 s) is not above MIRRORLAB_KEEPALIVE_TIMEOUT (20 s)"),
])
def test_keepalive_out_of_order_is_named(environ: dict, collective: float | None, words: str) -> None:
    findings = check_timeouts("worker:1", 1.0, collective, environ=environ)
    assert _codes(findings) == ["ML-LIVE-001"] and words in findings[0].message
    assert check_timeouts("worker:1", 1.0, 30.0, environ={"MIRRORLAB_KEEPALIVE_TIME": "3",
                                                         "MIRRORLAB_KEEPALIVE_TIMEOUT": "20"}) == []


def test_user_keepalive_values_from_the_environment() -> None:
    [bad] = check_timeouts("worker:1", 1.0, environ={"MIRRORLAB_KEEPALIVE_TIMEOUT": "soon"})
    assert bad.code == "ML-LIVE-002" and "MIRRORLAB_KEEPALIVE_TIMEOUT='soon'" in bad.message
    assert _codes(check_timeouts("worker:1", 0.1, environ={"MIRRORLAB_KEEPALIVE_TIME": "0.2"})) == ["ML-LIVE-005"]
    with pytest.raises(ValueError, match=r"MIRRORLAB_KEEPALIVE_TIME=0.2 pings more often .* Fix: set"):
        BackendSettings.from_environ({"MIRRORLAB_CLUSTER_TOKEN": "t", "MIRRORLAB_KEEPALIVE_TIME": "0.2"})
    settings = BackendSettings.from_environ({"MIRRORLAB_CLUSTER_TOKEN": "t", "MIRRORLAB_HEARTBEAT_TIMEOUT": "10"})
    assert settings.keepalive == Keepalive(4.0, 15.0)


def _open_idle_stream(server_options: list, client_options: list) -> tuple:
    """A loopback server and one client stream that sends one frame and then stays open with no data."""
    def drain(frames, context):
        for _ in frames:
            pass
        return b""

    class Handler(grpc.GenericRpcHandler):
        def service(self, details):
            return grpc.stream_unary_rpc_method_handler(drain)

    server = grpc.server(ThreadPoolExecutor(max_workers=2), handlers=[Handler()], options=server_options)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", client_options)
    frames: queue.SimpleQueue = queue.SimpleQueue()
    frames.put(b"x")
    call = channel.stream_unary("/t/Send").future(iter(frames.get, None),
                                                  timeout=30)  # bounded; keepalive must end it first
    return server, channel, frames, call


def test_a_real_server_goaways_eager_pings_exactly_when_the_lint_says() -> None:
    client = Keepalive(0.5, 0.25).client_options()
    ours = _open_idle_stream(Keepalive(0.5, 0.25).server_options(), client)
    theirs = _open_idle_stream([], client)  # gRPC's default server: pings at most every 5 minutes
    try:
        end = time.monotonic() + 15
        while not theirs[3].done() and time.monotonic() < end:
            time.sleep(0.05)
        assert theirs[3].done(), "the default server never sent GOAWAY"
        error = theirs[3].exception()
        assert error.code() == grpc.StatusCode.UNAVAILABLE and "too many pings" in error.details().lower()
        assert not ours[3].done(), "mirrorlab's server cut off its own client's keepalive"
    finally:
        for server, channel, frames, call in (ours, theirs):
            frames.put(None)
            call.cancel()
            channel.close()
            server.stop(0)
    assert set(_codes(check_keepalive("w", client, []))) == {"ML-LIVE-005"}
    assert check_keepalive("w", client, Keepalive(0.5, 0.25).server_options()) == []
