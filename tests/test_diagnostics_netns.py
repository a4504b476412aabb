"""`mirrorlab preflight` between real test hosts: network namespaces joined by a bridge, addresses in 192.0.2.0/24
only, firewalls made with nftables. Every preflight runs as a subprocess (`ip netns exec`), bounded in time and
killed by its own pid; every namespace is deleted in teardown. Skipped where namespaces cannot be made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mirrorlab.diagnostics.preflight_merge import merge_reports
from mirrorlab.scenarios import netns as netns_lab
from mirrorlab.scenarios.netns import NetnsLab
from mirrorlab.scenarios.netns_faults import nft_rule

PORT = 23456
TIMEOUT_S, WAIT_S, LINGER_S = 1.0, 3.0, 4.0
#: preflight's own bound (wait, five probe stages, linger) plus room for starting Python and importing gRPC.
BOUND_S = WAIT_S + 5 * TIMEOUT_S + LINGER_S + 20.0

_REASON = netns_lab.unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"no network namespaces: {_REASON}")
needs_tc = pytest.mark.skipif(shutil.which("tc") is None, reason="tc (iproute2) is not installed")
needs_nft = pytest.mark.skipif(shutil.which("nft") is None,
                               reason="nftables is not installed (.ci/run installs it when it runs as root)")


@dataclass
class Outcome:
    """One preflight's exit status, JSON report and wall time."""

    returncode: int
    report: dict
    elapsed_s: float

    def statuses(self) -> dict[str, str]:
        [summary] = [f for f in self.report["findings"] if f["code"] == "ML-NET-008"]
        return dict(part.split(" (")[0].split(" ", 1) for part in summary["evidence"].split("; "))

    def errors(self) -> dict[str, list]:
        return {f["code"]: f["workers"] for f in self.report["findings"] if f["severity"] == "error"}


@pytest.fixture
def lab(request: pytest.FixtureRequest) -> Iterator[NetnsLab]:
    with NetnsLab(getattr(request, "param", 3)) as made:
        yield made


def _tf_config(addresses: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}})


def _preflight(lab: NetnsLab, addresses: list[str], hosts: list[int], tmp_path: Path,
               extra: tuple[str, ...] = (), environ: dict[str, str] | None = None) -> dict[int, Outcome]:
    """Runs preflight as worker ``i`` on host ``i`` for every ``i`` in ``hosts`` at once; kills any still running
    after BOUND_S (by pid) and returns what each said."""
    started = {}
    for i in hosts:
        config = tmp_path / f"tf_config_{i}.json"
        config.write_text(_tf_config(addresses, i))
        argv = ["ip", "netns", "exec", lab.hosts[i].namespace, sys.executable, "-m", "mirrorlab", "preflight",
                "--tf-config", str(config), "--json", "--timeout", str(TIMEOUT_S), "--wait", str(WAIT_S),
                "--linger", str(LINGER_S), *extra]
        started[i] = (subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env={**os.environ, "NO_COLOR": "1", **(environ or {})}), time.monotonic())
    outcomes = {}
    try:
        for i, (process, t0) in started.items():
            out, err = process.communicate(timeout=max(0.1, t0 + BOUND_S - time.monotonic()))
            assert out, f"worker {i} printed nothing; stderr: {err}"
            outcomes[i] = Outcome(process.returncode, json.loads(out), time.monotonic() - t0)
    finally:
        for process, _ in started.values():
            if process.poll() is None:
                process.kill()
                process.wait(5.0)
    return outcomes


def _addresses(lab: NetnsLab) -> list[str]:
    return [f"{host.ip}:{PORT}" for host in lab.hosts]


def _nft(lab: NetnsLab, host: int, verdict: str, source: int) -> None:
    """On ``host``, applies ``verdict`` to TCP packets for PORT from ``source``'s address only."""
    nft_rule(lab.hosts[host].namespace, "mlt", "input", f"ip saddr {lab.hosts[source].ip} tcp dport {PORT} {verdict}")


def test_the_lab_cleans_up_its_namespaces() -> None:
    with NetnsLab(2) as made:
        names = [h.namespace for h in made.hosts] + [made.switch]
        listed = netns_lab.run("ip", "netns", "list").stdout
        assert all(name in listed for name in names)
    listed = netns_lab.run("ip", "netns", "list").stdout
    assert not any(name in listed for name in names)


def test_three_open_hosts_all_pass_within_the_bound(lab: NetnsLab, tmp_path: Path) -> None:
    outcomes = _preflight(lab, _addresses(lab), [0, 1, 2], tmp_path)
    for i, outcome in outcomes.items():
        assert outcome.returncode == 0, outcome.report
        assert set(outcome.statuses().values()) == {"ok"}
        assert outcome.elapsed_s < BOUND_S


@needs_nft
def test_a_drop_rule_is_filtered_for_exactly_that_pair(lab: NetnsLab, tmp_path: Path) -> None:
    _nft(lab, host=1, verdict="drop", source=0)
    outcomes = _preflight(lab, _addresses(lab), [0, 1, 2], tmp_path)
    assert outcomes[0].statuses() == {"worker:1": "filtered", "worker:2": "ok"}
    assert outcomes[0].errors() == {"ML-NET-002": ["worker:0", "worker:1"], "ML-NET-012": ["worker:0", "worker:1"]}
    assert outcomes[0].returncode == 1
    assert outcomes[1].statuses() == {"worker:0": "ok", "worker:2": "ok"} and outcomes[1].returncode == 0
    assert outcomes[2].statuses() == {"worker:0": "ok", "worker:1": "ok"} and outcomes[2].returncode == 0
    assert all(outcome.elapsed_s < BOUND_S for outcome in outcomes.values())
    merged, graph = merge_reports([(f"worker {i}", json.dumps(o.report)) for i, o in outcomes.items()])
    assert graph.number_of_edges() == 6
    [cut] = [f for f in merged if f.code == "ML-NET-012"]
    assert cut.workers == ("worker:0", "worker:1") and "ring all-reduce from worker:0" in cut.evidence


@needs_nft
def test_a_reject_rule_and_a_missing_listener_are_refused(lab: NetnsLab, tmp_path: Path) -> None:
    _nft(lab, host=1, verdict="reject with tcp reset", source=0)
    outcomes = _preflight(lab, _addresses(lab), [0, 1], tmp_path)  # nothing runs on host 2
    assert outcomes[0].statuses() == {"worker:1": "refused", "worker:2": "refused"}
    assert outcomes[1].statuses() == {"worker:0": "ok", "worker:2": "refused"}
    assert set(outcomes[0].errors()) == {"ML-NET-001", "ML-NET-012"}
    refused = [f["workers"] for f in outcomes[0].report["findings"] if f["code"] == "ML-NET-001"]
    assert sorted(refused) == [["worker:0", "worker:1"], ["worker:0", "worker:2"]]
    assert outcomes[0].returncode == outcomes[1].returncode == 1


@pytest.mark.parametrize("lab", [2], indirect=True)
def test_localhost_in_a_two_host_cluster_is_caught_statically(lab: NetnsLab, tmp_path: Path) -> None:
    outcomes = _preflight(lab, [f"{lab.hosts[0].ip}:{PORT}", f"localhost:{PORT}"], [0, 1], tmp_path)
    for outcome in outcomes.values():
        assert outcome.returncode == 2
        assert "ML-CFG-028" in outcome.errors()
        assert "ML-NET-008" not in {f["code"] for f in outcome.report["findings"]}  # no probe was sent


@pytest.mark.parametrize("lab", [2], indirect=True)
def test_a_host_name_that_is_localhost_in_disguise_is_observed_live(lab: NetnsLab, tmp_path: Path) -> None:
    # Debian's /etc/hosts maps the machine's own name to 127.0.1.1: the name passes the static check, but the
    # worker then listens on loopback only, and its peer is refused.
    lab.write_hosts_file(lab.hosts[0], f"127.0.0.1 localhost\n{lab.hosts[1].ip} hostb\n")
    lab.write_hosts_file(lab.hosts[1], "127.0.0.1 localhost\n127.0.1.1 hostb\n")
    outcomes = _preflight(lab, [f"{lab.hosts[0].ip}:{PORT}", f"hostb:{PORT}"], [0, 1], tmp_path)
    assert outcomes[0].statuses() == {"worker:1": "refused"} and outcomes[0].returncode == 1
    own = [f for f in outcomes[1].report["findings"] if f["code"] == "ML-NET-006"]
    assert [f["workers"] for f in own] == [["worker:1"]] and "127.0.1.1" in own[0]["evidence"]
    assert outcomes[1].returncode == 1


def _slow_down(lab: NetnsLab, host: int, to: int) -> str:
    """Slows the packets ``host`` sends to ``to`` (only those): an htb class of 20 Mbit/s picked by a u32 filter, with
    a netem delay of 30 ms under it where the kernel has netem. Returns what was done."""
    ns, device = lab.hosts[host].namespace, lab.hosts[host].interface
    for command in (("qdisc", "add", "dev", device, "root", "handle", "1:", "htb", "default", "10"),
                    ("class", "add", "dev", device, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"),
                    ("class", "add", "dev", device, "parent", "1:", "classid", "1:30", "htb", "rate", "20mbit"),
                    ("filter", "add", "dev", device, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
                     "ip", "dst", f"{lab.hosts[to].ip}/32", "flowid", "1:30")):
        done = netns_lab.run("tc", *command, namespace=ns, check=False)
        if done.returncode != 0:
            pytest.skip(f"tc cannot shape one link here (tc {' '.join(command[:2])}: {done.stderr.strip()})")
    delayed = netns_lab.run("tc", "qdisc", "add", "dev", device, "parent", "1:30", "handle", "30:", "netem", "delay",
                            "30ms", namespace=ns, check=False)
    return "20 Mbit/s" + (" and 30 ms" if delayed.returncode == 0 else " (no netem in this kernel)")


@needs_tc
def test_a_slowed_link_is_named_slow(lab: NetnsLab, tmp_path: Path) -> None:
    _slow_down(lab, host=0, to=2)
    outcomes = _preflight(lab, _addresses(lab), [0, 1, 2], tmp_path, ("--bulk-mib", "1", "--model-bytes", "4000000"))
    slow = [f for f in outcomes[0].report["findings"] if f["code"] == "ML-NET-009"]
    assert ["worker:0", "worker:2"] in [f["workers"] for f in slow]
    [matrix] = [f for f in outcomes[0].report["findings"] if f["code"] == "ML-NET-011"]
    assert "bounded by worker:0 -> worker:1" in matrix["message"]  # worker:0's only ring link; 0 -> 2 is not one
    assert all(outcome.returncode == 0 for outcome in outcomes.values())  # slow is a warning


def _codes(outcome: Outcome, code: str) -> list[dict]:
    return [f for f in outcome.report["findings"] if f["code"] == code]


@needs_nft
def test_a_firewalled_data_lane_port_is_a_warning_for_exactly_that_pair(lab: NetnsLab, tmp_path: Path) -> None:
    lane = PORT + 1
    nft_rule(lab.hosts[1].namespace, "mlt", "input", f"ip saddr {lab.hosts[0].ip} tcp dport {lane} drop")
    outcomes = _preflight(lab, _addresses(lab), [0, 1, 2], tmp_path,
                          environ={"MIRRORLAB_DATA_LANE_PORT": str(lane)})
    assert all(set(o.statuses().values()) == {"ok"} for o in outcomes.values())  # gRPC's port is open everywhere
    [blocked] = _codes(outcomes[0], "ML-NET-015")
    assert blocked["severity"] == "warning" and blocked["workers"] == ["worker:0", "worker:1"]
    assert f"data-lane port {lane} filtered" in blocked["message"] and f"Open TCP port {lane}" in blocked["fix"]
    assert not _codes(outcomes[1], "ML-NET-015") and not _codes(outcomes[2], "ML-NET-015")
    assert all(o.returncode == 0 and not _codes(o, "ML-NET-016") for o in outcomes.values())
    assert all(outcome.elapsed_s < BOUND_S for outcome in outcomes.values())


def test_lanes_on_a_port_the_kernel_picks_are_named_between_hosts(lab: NetnsLab, tmp_path: Path) -> None:
    outcomes = _preflight(lab, _addresses(lab), [0, 1], tmp_path, environ={"MIRRORLAB_DATA_LANE_PORT": ""})
    for outcome in outcomes.values():
        [unset] = _codes(outcome, "ML-NET-016")
        assert unset["severity"] == "info" and "MIRRORLAB_DATA_LANE_PORT" in unset["fix"]
    off = _preflight(lab, _addresses(lab), [0, 1], tmp_path, environ={"MIRRORLAB_DATA_LANE": "off"})
    assert not any(_codes(o, "ML-NET-016") or _codes(o, "ML-NET-015") for o in off.values())
