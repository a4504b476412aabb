"""`mirrorlab preflight` over loopback: real sockets and gRPC on 127.0.0.1 only, every wait bounded, every socket
and server the test opens closed again."""

from __future__ import annotations

import errno
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirrorlab.cli import main
from mirrorlab.diagnostics.findings import EXIT_FAILED, EXIT_INVALID_CONFIG, EXIT_PASS, exit_code
from mirrorlab.diagnostics.fingerprint import collect_fingerprint
from mirrorlab.diagnostics.preflight import probe_findings, run_preflight
from mirrorlab.diagnostics.preflight_probe import PeerProbe, Reach, probe_peer
from mirrorlab.diagnostics.preflight_server import ProbeServer

TIMEOUT_S = 0.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(ports: list[int], index: int = 0) -> str:
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker",
                                                                                          "index": index}})


@pytest.fixture
def dropping_port() -> Iterator[int]:
    """A loopback port whose accept queue is full, so further SYNs are silently dropped, as a firewall does."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.settimeout(0.2)
        fillers.append(filler)
        try:
            filler.connect(("127.0.0.1", port))
        except (socket.timeout, TimeoutError):
            break
    else:
        pytest.skip("this kernel accepts connections beyond a full backlog; cannot imitate a dropping firewall")
    yield port
    for s in fillers + [listener]:
        s.close()


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A loopback port where a plain TCP server accepts and hangs up: the wrong service."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                listener.accept()[0].close()
            except (socket.timeout, TimeoutError):
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(1.0)
    listener.close()


def _statuses(findings: list) -> dict[str, str]:
    [summary] = [f for f in findings if f.code == "ML-NET-008"]
    return dict(part.split(" (")[0].split(" ", 1) for part in summary.evidence.split("; "))


def test_every_failure_is_classified_for_exactly_its_pair(dropping_port: int, closing_port: int) -> None:
    ports = [_free_port(), _free_port(), _free_port(), dropping_port, closing_port]
    with ProbeServer(f"127.0.0.1:{ports[1]}", collect_fingerprint()):
        findings = run_preflight(_config(ports), timeout_s=TIMEOUT_S)
    assert _statuses(findings) == {"worker:1": "ok", "worker:2": "refused", "worker:3": "filtered",
                                   "worker:4": "wrong service"}
    errors = {f.code: f.workers for f in findings if f.severity.value == "error" and f.code != "ML-NET-012"}
    assert errors == {"ML-NET-001": ("worker:0", "worker:2"), "ML-NET-002": ("worker:0", "worker:3"),
                      "ML-NET-005": ("worker:0", "worker:4")}
    cut = [f.workers for f in findings if f.code == "ML-NET-012"]  # what each cut pair breaks
    assert cut == [("worker:0", "worker:2"), ("worker:0", "worker:3"), ("worker:0", "worker:4")]
    assert exit_code(findings) == EXIT_FAILED


def test_two_tasks_probe_each_other_and_compare_fingerprints() -> None:
    ports = [_free_port(), _free_port()]
    results: dict[int, list] = {}

    def task(index: int) -> None:
        results[index] = run_preflight(_config(ports, index), timeout_s=TIMEOUT_S, wait_s=5.0, linger_s=1.0)

    threads = [threading.Thread(target=task, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20.0)
    assert sorted(results) == [0, 1]
    assert _statuses(results[0]) == {"worker:1": "ok"} and _statuses(results[1]) == {"worker:0": "ok"}
    assert exit_code(results[0]) == exit_code(results[1]) == EXIT_PASS
    assert not [f for f in results[0] if f.code.startswith("ML-ENV-")]  # same host, same environment


def test_a_peer_that_comes_up_inside_the_window_is_not_a_failure() -> None:
    port = _free_port()
    server = ProbeServer(f"127.0.0.1:{port}", collect_fingerprint())
    starter = threading.Timer(0.6, server.start)
    starter.start()
    try:
        probe = probe_peer("worker:1", f"127.0.0.1:{port}", timeout_s=TIMEOUT_S, wait_s=5.0)
    finally:
        starter.join()
        server.stop()
    assert probe.status is Reach.OK and probe.attempts > 1 and probe.fingerprint is not None
    assert probe_peer("worker:1", f"127.0.0.1:{port}", timeout_s=TIMEOUT_S).status is Reach.REFUSED


def test_unresolvable_uses_the_resolver_and_never_real_dns() -> None:
    def resolver(host: str, port: int, **kwargs: object) -> list:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    probe = probe_peer("worker:1", "worker-1.training.svc:2222", timeout_s=TIMEOUT_S, resolve=resolver)
    assert probe.status is Reach.UNRESOLVABLE and "worker-1.training.svc" in probe.detail
    [finding] = [f for f in probe_findings("worker:0", [probe], multi_host=True) if f.code == "ML-NET-003"]
    assert finding.workers == ("worker:0", "worker:1")


def test_a_name_resolving_to_loopback_in_a_multi_host_cluster() -> None:
    probe = PeerProbe("worker:1", "trainer-b:2222", Reach.OK, resolved=("127.0.1.1",))
    assert "ML-NET-006" in {f.code for f in probe_findings("worker:0", [probe], multi_host=True)}
    assert "ML-NET-006" not in {f.code for f in probe_findings("worker:0", [probe], multi_host=False)}
    literal = PeerProbe("worker:1", "127.0.0.1:2222", Reach.OK, resolved=("127.0.0.1",))
    assert "ML-NET-006" not in {f.code for f in probe_findings("worker:0", [literal], multi_host=True)}


def test_own_port_taken_is_reported_and_peers_still_probed() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        ports = [squatter.getsockname()[1], _free_port()]
        findings = run_preflight(_config(ports), timeout_s=TIMEOUT_S)
    codes = {f.code for f in findings}
    assert {"ML-NET-007", "ML-NET-001"} <= codes


def test_invalid_tf_config_stops_before_any_network() -> None:
    findings = run_preflight(_config([_free_port()], index=3), timeout_s=TIMEOUT_S)
    assert exit_code(findings) == EXIT_INVALID_CONFIG
    assert not [f for f in findings if f.code.startswith("ML-NET-")]


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tf_config.json"
    path.write_text(_config([_free_port(), _free_port()]))
    code = main(["preflight", "--tf-config", str(path), "--timeout", str(TIMEOUT_S), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == document["exit_code"] == EXIT_FAILED
    assert "ML-NET-001" in {f["code"] for f in document["findings"]}
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert main(["preflight"]) == EXIT_INVALID_CONFIG
    assert "TF_CONFIG is unset" in capsys.readouterr().err
    assert main(["preflight", "--tf-config", str(path), "--timeout", "0"]) == EXIT_INVALID_CONFIG
    assert main(["preflight", "--tf-config", str(tmp_path / "missing.json")]) == EXIT_INVALID_CONFIG


def test_no_route_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_route(address: tuple, timeout: float) -> socket.socket:
        raise OSError(errno.EHOSTUNREACH, "No route to host")

    monkeypatch.setattr(socket, "create_connection", no_route)
    probe = probe_peer("worker:1", "127.0.0.1:2222", timeout_s=TIMEOUT_S, wait_s=5.0)
    assert probe.status is Reach.UNREACHABLE and probe.attempts == 1  # fails fast, not retried in the window
    assert "ML-NET-004" in {f.code for f in probe_findings("worker:0", [probe], multi_host=False)}
