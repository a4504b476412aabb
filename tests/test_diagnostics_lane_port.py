"""Preflight's data-lane settings between hosts, without namespaces: which port it checks, the findings the
settings alone give, and the probe of one peer's lane port on loopback (listening, refused)."""

from __future__ import annotations

import pytest

from mirrorlab.backend.ports import free_ports
from mirrorlab.diagnostics.lane_port_check import (LANE_PORT_BLOCKED, LANE_PORT_UNSET, LANE_SETTING_INVALID,
                                                   LaneListener, lane_port, lane_port_finding, lane_setup_findings)

TLS = {"MIRRORLAB_TLS_CERT": "c.pem", "MIRRORLAB_TLS_KEY": "k.pem", "MIRRORLAB_TLS_CA": "ca.pem"}


@pytest.mark.parametrize("environ, port", [
    ({}, 0), ({"MIRRORLAB_DATA_LANE_PORT": "2300"}, 2300), ({"MIRRORLAB_DATA_LANE": "off"}, None),
    (TLS, None), ({**TLS, "MIRRORLAB_DATA_LANE": "on", "MIRRORLAB_DATA_LANE_PORT": "2300"}, 2300)])
def test_the_port_checked_is_the_one_the_backend_would_use(environ, port):
    assert lane_port(environ) == port


def test_the_settings_alone_name_an_unset_or_malformed_port():
    assert lane_setup_findings("worker:0", {"MIRRORLAB_DATA_LANE_PORT": "2300"}) == (2300, [])
    port, [unset] = lane_setup_findings("worker:0", {})
    assert port is None and unset.code == LANE_PORT_UNSET and "MIRRORLAB_DATA_LANE_PORT" in unset.fix
    port, [bad] = lane_setup_findings("worker:0", {"MIRRORLAB_DATA_LANE": "yes"})
    assert port is None and bad.code == LANE_SETTING_INVALID and "MIRRORLAB_DATA_LANE='yes'" in bad.evidence
    assert bad.fix.startswith("e.g. MIRRORLAB_DATA_LANE=off")


def test_a_listening_lane_port_passes_and_a_missing_one_is_named_with_its_fix():
    listening, closed = free_ports(2)
    listener = LaneListener("127.0.0.1", listening).start()
    try:
        assert lane_port_finding("worker:0", "worker:1", "127.0.0.1", listening, 1.0, 0.0) is None
    finally:
        listener.stop()
    refused = lane_port_finding("worker:0", "worker:1", "127.0.0.1", closed, 1.0, 0.3)
    assert refused.code == LANE_PORT_BLOCKED and refused.workers == ("worker:0", "worker:1")
    assert f"data-lane port {closed} refused" in refused.message
    assert refused.fix == f"Run worker:1's preflight with MIRRORLAB_DATA_LANE_PORT={closed} too (every worker uses " \
                          "the same setting)."
