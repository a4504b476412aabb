"""Liveness lints: the timeouts' order (ML-LIVE-001, ML-LIVE-002), gRPC calls without a deadline (ML-LIVE-003, run
over mirrorlab's own source too), and the clock skew measured in the fingerprint exchange (ML-NET-014)."""

from __future__ import annotations

import importlib
import json
import socket
import time
import types
from pathlib import Path

import pytest

from mirrorlab.cli import main
from mirrorlab.diagnostics import preflight_server
from mirrorlab.diagnostics.fingerprint import collect_fingerprint
from mirrorlab.diagnostics.liveness_lint import check_timeouts, compare_liveness
from mirrorlab.diagnostics.preflight import preflight, probe_findings
from mirrorlab.diagnostics.preflight_probe import PeerProbe, Reach, probe_peer
from mirrorlab.diagnostics.preflight_server import ProbeServer
from mirrorlab.diagnostics.rpc_deadline_lint import check_rpc_deadlines, rpc_calls_without_deadline


def _messages(findings: list, code: str) -> list[str]:
    return [f.message for f in findings if f.code == code]


def test_default_and_ordered_timeouts_pass() -> None:
    assert check_timeouts("worker:0", 2.0, environ={}) == []
    assert check_timeouts("worker:0", 1.0, collective_s=30.0, job_s=3600.0,
                          environ={"MIRRORLAB_HEARTBEAT_TIMEOUT": "10", "MIRRORLAB_RENDEZVOUS_TIMEOUT": "120"}) == []


@pytest.mark.parametrize("connect, collective, job, environ, words", [
    (6.0, None, None, {}, "connect deadline (6 s) is not below MIRRORLAB_HEARTBEAT_TIMEOUT (5 s)"),
    (1.0, 3.0, None, {}, "CommunicationOptions.timeout_seconds (3 s) is not above MIRRORLAB_HEARTBEAT_TIMEOUT"),
    (1.0, None, 30.0, {},
     "job timeout (30 s) is not above the rendezvous window (MIRRORLAB_RENDEZVOUS_TIMEOUT = 60 s)"),
    (1.0, 600.0, 300.0, {"MIRRORLAB_RENDEZVOUS_TIMEOUT": "10"}, "and the collective timeout (600 s)"),
])
def test_timeouts_out_of_order_are_named(connect: float, collective: float | None, job: float | None,
                                         environ: dict, words: str) -> None:
    [message] = _messages(check_timeouts("worker:1", connect, collective, job, environ), "ML-LIVE-001")
    assert words in message


@pytest.mark.parametrize("raw", ["abc", "0", "-3", "inf", "nan"])
def test_a_malformed_timeout_variable_names_the_variable(raw: str) -> None:
    findings = check_timeouts("worker:1", 1.0, environ={"MIRRORLAB_HEARTBEAT_TIMEOUT": raw})
    assert [(f.code, f.workers) for f in findings] == [("ML-LIVE-002", ("worker:1",))]
    assert f"MIRRORLAB_HEARTBEAT_TIMEOUT={raw!r}" in findings[0].message


def test_preflight_reports_the_order_and_rejects_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}"]}, "task": {"type": "worker", "index": 0}})
    report = preflight(config, timeout_s=0.5, collective_timeout_s=2.0)
    assert "ML-LIVE-001" in {f.code for f in report.findings}
    assert main(["preflight", "--job-timeout", "-1"]) == 2
    assert "--job-timeout -1.0 is not a positive number of seconds" in capsys.readouterr().err


SOURCE = '''
import grpc
channel = grpc.insecure_channel("127.0.0.1:1")
ping = channel.unary_unary("/s/Ping")
ping(b"")                                   # line 5: no deadline
ping(b"", timeout=None)                     # line 6: no deadline either
ping(b"", timeout=2.0)
channel.unary_unary("/s/Other")(b"")        # line 8
channel.unary_unary("/s/Other")(b"", timeout=1)
ping.future(b"")                            # line 10
ping.with_call(b"", timeout=3)
print("not an rpc")
'''


def test_rpc_calls_without_a_deadline_are_found(tmp_path: Path) -> None:
    assert rpc_calls_without_deadline(SOURCE) == [5, 6, 8, 10]
    path = tmp_path / "client.py"
    path.write_text(SOURCE)
    findings = check_rpc_deadlines([path])
    assert [f.code for f in findings] == ["ML-LIVE-003"] * 4 and f"{path}:5" in findings[0].message


def test_a_long_lived_stream_may_say_why_it_has_no_deadline() -> None:
    source = ("stream = channel.stream_unary('/S/Send')\n"
              "a = stream.future(frames())  # no deadline: heartbeats watch the peer\n"
              "b = stream.future(frames())\n")
    assert rpc_calls_without_deadline(source) == [3]


def test_every_rpc_in_mirrorlab_has_a_deadline() -> None:
    packages = [importlib.import_module(name) for name in ("mirrorlab", "mirrorlab.diagnostics", "mirrorlab.backend",
                                                           "mirrorlab.sim")]
    sources = sorted({p for package in packages for p in Path(package.__file__).resolve().parent.rglob("*.py")})
    assert any(p.name == "link_probe.py" for p in sources) and check_rpc_deadlines(sources) == []


def test_a_skewed_peer_clock_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    skewed = types.SimpleNamespace(time=lambda: time.time() + 30.0)
    monkeypatch.setattr(preflight_server, "time", skewed)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ProbeServer(f"127.0.0.1:{port}", collect_fingerprint()):
        probe = probe_peer("worker:1", f"127.0.0.1:{port}", timeout_s=2.0)
    assert probe.status is Reach.OK and 29.0 < probe.clock_skew_s < 31.0
    [message] = _messages(probe_findings("worker:0", [probe], multi_host=False), "ML-NET-014")
    assert message.startswith("worker:1's clock is +") and "s off worker:0's" in message
    in_step = PeerProbe("worker:1", "h:1", Reach.OK, clock_skew_s=0.3, skew_error_s=0.001)
    assert not _messages(probe_findings("worker:0", [in_step], multi_host=False), "ML-NET-014")


def test_workers_that_disagree_on_a_liveness_variable_are_named() -> None:
    def fingerprint(heartbeat: str | None) -> dict:
        return {"liveness": {"MIRRORLAB_HEARTBEAT_TIMEOUT": heartbeat, "MIRRORLAB_RENDEZVOUS_TIMEOUT": None}}

    findings = compare_liveness([("worker:0", fingerprint(None)), ("worker:1", fingerprint("30")),
                                 ("worker:2", {"schema": "older peer"})])
    assert [(f.code, f.workers) for f in findings] == [("ML-LIVE-004", ("worker:0", "worker:1"))]
    assert findings[0].evidence == "worker:0: 5 (default), worker:1: 30"
    assert compare_liveness([("worker:0", fingerprint("5")), ("worker:1", fingerprint("5"))]) == []
    assert "MIRRORLAB_HEARTBEAT_TIMEOUT" in collect_fingerprint()["liveness"]


STUB_SOURCE = '''
from grpc_health.v1 import health_pb2, health_pb2_grpc
health_pb2_grpc.HealthStub(channel).Check(request)           # line 3: no deadline
health_pb2_grpc.HealthStub(channel).Check(request, timeout=2)
stub = GreeterStub(channel)
stub.SayHello(request)                                       # line 6
stub.SayHello(request, timeout=None)                         # line 7
stub.SayHello.future(request)                                # line 8
stub.SayHello.with_call(request, timeout=1.5)
stub.SayHello(request)  # no deadline: a test server that never drops
self.stub = health_pb2_grpc.HealthStub(channel)
self.stub.Watch(request)                                     # line 12
ping = self.channel.unary_unary("/s/Ping")
ping(b"")                                                    # line 14
other = make_client(channel)
other.Check(request)                                         # not a stub: left alone
Stub(channel).Check(request)                                 # a class named just Stub: left alone
'''


def test_calls_through_generated_stubs_without_a_deadline_are_found() -> None:
    assert rpc_calls_without_deadline(STUB_SOURCE) == [3, 6, 7, 8, 12, 14]
