"""The collective path is chosen from the cluster's addresses alone (so every worker agrees), and
``MIRRORLAB_TRANSPORT`` overrides it or is refused with the fix."""

import socket

import pytest

from mirrorlab.backend.transport_choice import TRANSPORT_VAR, choose_transport, is_this_host


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost", socket.gethostname()])
def test_loopback_and_this_hosts_name_are_this_host(host):
    assert is_this_host(host)


@pytest.mark.parametrize("host", ["192.0.2.7", "2001:db8::1", "other-host.invalid"])
def test_other_addresses_are_not_this_host(host):
    assert not is_this_host(host)


def test_auto_picks_shm_only_when_every_worker_is_on_this_host():
    assert choose_transport(["127.0.0.1:4000", "localhost:4001", "[::1]:4002"], {}) == "shm"
    assert choose_transport(["127.0.0.1:4000", "192.0.2.7:4001"], {TRANSPORT_VAR: "auto"}) == "grpc"


@pytest.mark.parametrize("mode", ["shm", "grpc"])
def test_the_variable_overrides_the_choice(mode):
    assert choose_transport(["127.0.0.1:4000", "127.0.0.1:4001"], {TRANSPORT_VAR: mode}) == mode


def test_an_unknown_mode_names_the_variable_and_the_fix():
    with pytest.raises(ValueError, match=r"MIRRORLAB_TRANSPORT='nccl' is not one of auto, shm, grpc\. Fix"):
        choose_transport(["127.0.0.1:4000"], {TRANSPORT_VAR: "nccl"})


def test_the_simulator_reports_its_transport_in_strategy_extended():
    import mirrorlab.tf as tf
    from mirrorlab.sim import SimCluster

    def program():
        return tf.distribute.MultiWorkerMirroredStrategy().extended.transport_name

    assert SimCluster(workers=2).run(program).values() == ["simulated", "simulated"]
