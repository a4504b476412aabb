"""Data lanes between real test hosts (network namespaces on one bridge, 192.0.2.0/24 only): a firewall that drops
two hosts' lane port costs every worker's start-up one connect timeout, not one per firewalled peer; those pairs
stay on gRPC (each logged, naming the peer and the fix) and the results equal the simulator's. Every worker runs
as a subprocess (`ip netns exec`), bounded in time and killed by its own pid; every namespace is deleted."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import backend_programs
from mirrorlab.backend.launch import tf_configs
from mirrorlab.backend.settings import DATA_LANE_CONNECT_VAR, DATA_LANE_PORT_VAR, DATA_LANE_VAR, TOKEN_VAR
from mirrorlab.scenarios import netns as netns_lab
from mirrorlab.scenarios.netns import NetnsLab
from mirrorlab.scenarios.netns_faults import nft_rule
from mirrorlab.sim import SimCluster

PORT, LANE_PORT = 23456, 23457
CONNECT_S = 2.0  # each lane connect's bound (MIRRORLAB_DATA_LANE_CONNECT_TIMEOUT)
LIMIT_S = 60.0  # no worker may outlive this
PROGRAMS = str(Path(__file__).parent / "backend_programs.py")

_REASON = netns_lab.unavailable_reason()
pytestmark = [pytest.mark.skipif(_REASON is not None, reason=f"no network namespaces: {_REASON}"),
              pytest.mark.skipif(shutil.which("nft") is None, reason="nftables is not installed")]


def _run_workers(lab: NetnsLab) -> list[tuple[int, str]]:
    """Worker i on host i runs ``backend_programs.custom_loop``; each one's (exit code, output), all bounded."""
    configs = tf_configs([f"{host.ip}:{PORT}" for host in lab.hosts])
    base = {k: v for k, v in os.environ.items() if not k.startswith("MIRRORLAB_") and k != "TF_CONFIG"}
    base.update({TOKEN_VAR: "netns-lane-token", DATA_LANE_VAR: "on", DATA_LANE_PORT_VAR: str(LANE_PORT),
                 DATA_LANE_CONNECT_VAR: str(CONNECT_S), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    procs = [subprocess.Popen(["ip", "netns", "exec", host.namespace, sys.executable, PROGRAMS, "custom_loop"],
                              env={**base, "TF_CONFIG": config}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
             for host, config in zip(lab.hosts, configs)]
    end = time.monotonic() + LIMIT_S
    outputs = []
    try:
        for proc in procs:
            outputs.append((proc.wait(max(0.1, end - time.monotonic())), proc.stdout.read()))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    return outputs


def _no_lane(output: str) -> dict[int, float]:
    """The peers a worker's log says it has no data lane to, with the seconds it took to give each up."""
    return {int(peer): float(seconds)
            for peer, seconds in re.findall(r"no data lane to worker (\d+) \([^)]*\) after ([\d.]+) s", output)}


def test_lane_ports_dropped_by_a_firewall_cost_one_connect_timeout_and_leave_those_pairs_on_grpc():
    simulated = SimCluster(workers=4).run(backend_programs.custom_loop).values()
    with NetnsLab(4) as lab:
        for host in (2, 3):  # hosts 2 and 3 drop whatever comes to their lane port; gRPC's port stays open
            nft_rule(lab.hosts[host].namespace, "mlt", "input", f"tcp dport {LANE_PORT} drop")
        outputs = _run_workers(lab)
    for worker, (code, out) in enumerate(outputs):
        assert code == 0, f"worker {worker}:\n{out}"
        assert "TRANSPORT grpc+lane" in out, out  # every worker still has lanes to the hosts that accept them
        assert f"Fix: let this host reach TCP port {LANE_PORT} of that worker's host (fix the port with " \
               f"{DATA_LANE_PORT_VAR} and open it in the firewall), or set {DATA_LANE_VAR}=off" in out, out
        result = next(line for line in out.splitlines() if line.startswith("RESULT "))
        assert json.loads(result.split(" ", 1)[1].rsplit(" pid ", 1)[0]) == simulated[worker]
    given_up = [_no_lane(out) for _, out in outputs]
    assert [sorted(g) for g in given_up] == [[2, 3], [2, 3], [3], [2]]
    # both firewalled peers were tried at once: each given up after one connect timeout, as the workers' logs say
    # (in turn, the second would have taken two; test_data_lane.py shows the connects overlap without timing)
    assert all(CONNECT_S * 0.9 <= seconds < CONNECT_S * 1.9 for g in given_up for seconds in g.values()), given_up
