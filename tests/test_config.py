"""``tf.config``'s device functions, with the values and errors TF 2.21 gives (recorded from it): virtual CPUs for
MirroredStrategy, TF's freeze once devices are initialized, and each simulated worker's own configuration."""

from __future__ import annotations

import pytest

import mirrorlab.tf as ml
from mirrorlab import config
from mirrorlab.runtime import current_environment
from mirrorlab.sim import SimCluster

import fake_cupy

CPU0 = config.PhysicalDevice("/physical_device:CPU:0", "CPU")


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    """Each test starts as a new process would: no devices configured or initialized."""
    monkeypatch.delitem(current_environment().process_state, "tf.config", raising=False)


def test_virtual_cpus_give_mirrored_strategy_its_replicas_as_in_tf():
    assert config.list_physical_devices() == [CPU0]
    assert config.list_physical_devices("GPU") == [] and config.list_physical_devices("cpu") == []
    assert config.get_logical_device_configuration(CPU0) is None
    config.set_logical_device_configuration(CPU0, [config.LogicalDeviceConfiguration()] * 3)
    assert repr(config.get_logical_device_configuration(CPU0)[0]) == (
        "LogicalDeviceConfiguration(memory_limit=None, experimental_priority=None, experimental_device_ordinal=None)")
    assert [d.name for d in config.list_logical_devices("CPU")] == [f"/device:CPU:{k}" for k in range(3)]
    strategy = ml.distribute.MirroredStrategy()
    assert strategy.extended.worker_devices == tuple(f"/job:localhost/replica:0/task:0/device:CPU:{k}"
                                                     for k in range(3))
    # MWMS never uses virtual CPUs: one CPU replica per worker, as TF.
    assert ml.distribute.MultiWorkerMirroredStrategy().num_replicas_in_sync == 1


def test_devices_freeze_once_initialized_but_the_same_configuration_is_accepted():
    config.set_logical_device_configuration(CPU0, [config.LogicalDeviceConfiguration()] * 2)
    config.set_logical_device_configuration(CPU0, [config.LogicalDeviceConfiguration()] * 3)  # not yet frozen
    ml.distribute.MirroredStrategy()
    config.set_logical_device_configuration(CPU0, [config.LogicalDeviceConfiguration()] * 3)
    with pytest.raises(RuntimeError, match="^Virtual devices cannot be modified after being initialized"):
        config.set_logical_device_configuration(CPU0, [config.LogicalDeviceConfiguration()] * 2)
    with pytest.raises(RuntimeError, match="^Visible devices cannot be modified after being initialized"):
        config.set_visible_devices([], "CPU")
    config.set_visible_devices([CPU0])  # unchanged: accepted


def test_tf_argument_errors():
    with pytest.raises(ValueError, match="^Unrecognized device: 'CPU:0'"):
        config.set_logical_device_configuration("CPU:0", [config.LogicalDeviceConfiguration()])
    with pytest.raises(ValueError, match="^Setting memory limit on CPU virtual devices is currently not supported$"):
        config.set_logical_device_configuration(CPU0, [config.LogicalDeviceConfiguration(memory_limit=100)])
    with pytest.raises(TypeError, match="'NoneType' object is not iterable"):
        config.set_logical_device_configuration(CPU0, None)
    with pytest.raises(ValueError, match="^Cannot set memory growth on non-GPU and non-Pluggable devices$"):
        config.experimental.set_memory_growth(CPU0, True)
    with pytest.raises(KeyError):
        config.experimental.get_memory_growth(CPU0)
    config.set_logical_device_configuration(CPU0, [])
    with pytest.raises(ValueError, match="^Cannot set memory growth on device when virtual devices configured$"):
        config.experimental.set_memory_growth(CPU0, True)
    assert config.experimental.VirtualDeviceConfiguration is config.LogicalDeviceConfiguration
    assert config.experimental.get_device_details(CPU0) == {}


def test_functions_run_eagerly_flag_is_kept():
    assert config.functions_run_eagerly() is False
    config.run_functions_eagerly(True)
    assert config.functions_run_eagerly() is True


def test_hiding_gpus_puts_strategies_on_the_cpu(monkeypatch):
    fake_cupy.install(monkeypatch)
    gpus = config.list_physical_devices("GPU")
    assert [g.name for g in gpus] == [f"/physical_device:GPU:{k}" for k in range(fake_cupy.DEVICE_COUNT)]
    config.experimental.set_memory_growth(gpus[0], True)
    assert config.experimental.get_memory_growth(gpus[0]) is True
    config.set_visible_devices(gpus[1:], "GPU")
    assert config.get_visible_devices() == [CPU0, *gpus[1:]]
    assert [d.name for d in config.list_logical_devices("GPU")] == [
        f"/device:GPU:{k}" for k in range(fake_cupy.DEVICE_COUNT - 1)]
    monkeypatch.delitem(current_environment().process_state, "tf.config")
    config.set_visible_devices([], "GPU")
    assert ml.distribute.MirroredStrategy().extended.worker_devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)
    assert ml.distribute.MultiWorkerMirroredStrategy().extended.worker_devices == (
        "/job:localhost/replica:0/task:0/device:CPU:0",)


def test_a_gpu_is_not_split_and_needs_a_memory_limit(monkeypatch):
    fake_cupy.install(monkeypatch)
    gpu = config.list_physical_devices("GPU")[0]
    with pytest.raises(ValueError, match="^Setting memory limit is required for GPU virtual devices$"):
        config.set_logical_device_configuration(gpu, [config.LogicalDeviceConfiguration()])
    with pytest.raises(ValueError, match="cannot be split into 2 logical GPUs.\nFix: "):
        config.set_logical_device_configuration(gpu, [config.LogicalDeviceConfiguration(100)] * 2)


def test_each_simulated_worker_has_its_own_devices():
    def program():
        before = [d.name for d in config.list_logical_devices()]
        mwms = ml.distribute.MultiWorkerMirroredStrategy()
        return before, mwms.num_replicas_in_sync

    assert SimCluster(workers=2, devices_per_worker=3).run(program).values() == [
        ([f"/device:CPU:{k}" for k in range(3)], 6)] * 2

    def split_cpu():
        config.set_logical_device_configuration(CPU0, [config.LogicalDeviceConfiguration()] * 2)
        return ml.distribute.MirroredStrategy().num_replicas_in_sync

    assert SimCluster(workers=2, devices_per_worker=3).run(split_cpu).values() == [2, 2]
