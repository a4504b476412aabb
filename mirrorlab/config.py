"""``tf.config``'s device functions: list physical and logical devices, split the CPU into virtual devices,
hide devices, and TF's rules for when they may change.

Each worker (a process, or a simulated worker) keeps its own configuration. A bare ``MirroredStrategy()``
uses the logical devices listed here, as TF does: every visible GPU, else every logical CPU. On a
simulated cluster each worker starts with the simulator's devices (``devices_per_worker`` CPUs or GPUs).
The first strategy or ``list_logical_devices`` call initializes the devices; after that, TF refuses
changes, and so does mirrorlab.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, NamedTuple

from .runtime import current_environment

__all__ = ["PhysicalDevice", "LogicalDevice", "LogicalDeviceConfiguration", "list_physical_devices",
           "list_logical_devices", "set_logical_device_configuration", "get_logical_device_configuration",
           "set_visible_devices", "get_visible_devices", "run_functions_eagerly", "functions_run_eagerly",
           "experimental", "mirrored_devices", "worker_device_type"]

_TYPES = ("CPU", "GPU")


class PhysicalDevice(NamedTuple):
    """A device of this worker's machine (``/physical_device:CPU:0``)."""

    name: str
    device_type: str


class LogicalDevice(NamedTuple):
    """A device strategies place replicas on (``/device:CPU:1``)."""

    name: str
    device_type: str


class LogicalDeviceConfiguration(NamedTuple):
    """One logical device of a physical one; ``memory_limit`` (MB) applies to GPUs only."""

    memory_limit: int | None = None
    experimental_priority: int | None = None
    experimental_device_ordinal: int | None = None


class _DeviceState:
    """One worker's device configuration: what is visible, the virtual splits, and whether it is frozen."""

    def __init__(self) -> None:
        device_type, count = current_environment().default_device_type()
        gpus = count if device_type == "GPU" else 0
        self.default_cpus = count if device_type == "CPU" else 1
        self.physical = [PhysicalDevice("/physical_device:CPU:0", "CPU")] + [
            PhysicalDevice(f"/physical_device:GPU:{k}", "GPU") for k in range(gpus)]
        self.visible = list(self.physical)
        self.virtual: dict[str, list[LogicalDeviceConfiguration]] = {}
        self.memory_growth: dict[str, bool] = {}
        self.eager_functions = False
        self.initialized = False

    def logical(self) -> list[LogicalDevice]:
        out, counts = [], {t: 0 for t in _TYPES}
        for device in sorted(self.visible, key=lambda d: _TYPES.index(d.device_type)):
            configured = self.virtual.get(device.name)
            n = len(configured) if configured is not None else (
                self.default_cpus if device.device_type == "CPU" else 1)
            for _ in range(n):
                out.append(LogicalDevice(f"/device:{device.device_type}:{counts[device.device_type]}",
                                         device.device_type))
                counts[device.device_type] += 1
        return out

    def check_known(self, device: Any) -> PhysicalDevice:
        if not isinstance(device, PhysicalDevice) or device not in self.physical:
            raise ValueError(f"Unrecognized device: {device!r}\nFix: pass one of tf.config.list_physical_devices().")
        return device


def _state() -> _DeviceState:
    env_state = current_environment().process_state
    if "tf.config" not in env_state:
        env_state["tf.config"] = _DeviceState()
    return env_state["tf.config"]


def _of_type(devices: Sequence[Any], device_type: str | None) -> list[Any]:
    return [d for d in devices if device_type is None or d.device_type == device_type]


def list_physical_devices(device_type: str | None = None) -> list[PhysicalDevice]:
    """This worker's physical devices, optionally of one type (``"CPU"``, ``"GPU"``; case-sensitive as TF)."""
    return _of_type(_state().physical, device_type)


def list_logical_devices(device_type: str | None = None) -> list[LogicalDevice]:
    """The logical devices strategies can use; listing them initializes the devices (as in TF)."""
    state = _state()
    state.initialized = True
    return _of_type(state.logical(), device_type)


def get_logical_device_configuration(device: PhysicalDevice) -> list[LogicalDeviceConfiguration] | None:
    """The virtual devices set on ``device``, or None when none were set."""
    state = _state()
    configured = state.virtual.get(state.check_known(device).name)
    return None if configured is None else list(configured)


def set_logical_device_configuration(device: PhysicalDevice,
                                     logical_devices: Sequence[LogicalDeviceConfiguration] | None) -> None:
    """Split ``device`` into ``len(logical_devices)`` logical devices (CPUs: any number; GPUs: one, with an
    optional ``memory_limit`` in MB that caps CuPy's memory pool on that GPU)."""
    state = _state()
    device = state.check_known(device)
    configs = list(logical_devices)  # None raises TF's TypeError ('NoneType' object is not iterable)
    if device.device_type == "CPU":
        if any(c.memory_limit is not None for c in configs):
            raise ValueError("Setting memory limit on CPU virtual devices is currently not supported")
        if any(c.experimental_priority is not None for c in configs):
            raise ValueError("Setting experimental_priority on CPU virtual  devices is currently not supported")
    else:
        if any(c.memory_limit is None for c in configs):
            raise ValueError("Setting memory limit is required for GPU virtual devices")
        if len(configs) > 1:
            raise ValueError(f"mirrorlab maps each logical GPU to one physical GPU; {device.name} cannot be split "
                             f"into {len(configs)} logical GPUs.\nFix: use several physical GPUs, or simulate them "
                             "with mirrorlab.sim.SimCluster(devices_per_worker=N, device_type='GPU').")
    if state.virtual.get(device.name) == configs:
        return
    if state.initialized:
        raise RuntimeError("Virtual devices cannot be modified after being initialized\nFix: configure devices at "
                           "the start of the program, before creating a strategy or listing logical devices.")
    if device.device_type == "GPU" and configs:
        _limit_gpu_pool(_ordinal(device), configs[0].memory_limit)
    state.virtual[device.name] = configs


def _ordinal(device: PhysicalDevice) -> int:
    """``k`` of ``/physical_device:GPU:k``."""
    return int(device.name.rsplit(":", 1)[1])


def _limit_gpu_pool(gpu: int, megabytes: int) -> None:
    """Cap CuPy's default memory pool on ``gpu`` (only reached on a machine with CuPy and that GPU)."""
    from .placement import gpu_module

    found = gpu_module()
    if found is not None:
        cupy = found[0]
        with cupy.cuda.Device(gpu):
            cupy.get_default_memory_pool().set_limit(size=int(megabytes) * 1024 * 1024)


def set_visible_devices(devices: PhysicalDevice | Sequence[PhysicalDevice], device_type: str | None = None) -> None:
    """Make only ``devices`` (of ``device_type``, or of every type) visible to strategies."""
    state = _state()
    chosen = [state.check_known(d) for d in ([devices] if isinstance(devices, PhysicalDevice) else devices)]
    kept = [d for d in state.visible if device_type is not None and d.device_type != device_type]
    visible = [d for d in state.physical if d in chosen or d in kept]
    if state.initialized:
        if visible != state.visible:
            raise RuntimeError("Visible devices cannot be modified after being initialized\nFix: choose visible "
                               "devices at the start of the program, before creating a strategy.")
        return
    state.visible = visible


def get_visible_devices(device_type: str | None = None) -> list[PhysicalDevice]:
    """The physical devices strategies may use."""
    return _of_type(_state().visible, device_type)


def set_memory_growth(device: PhysicalDevice, enable: bool) -> None:
    """Record memory growth for a GPU (CuPy's pool always grows on demand); refused for CPUs, as TF."""
    state = _state()
    device = state.check_known(device)
    if device.name in state.virtual:
        raise ValueError("Cannot set memory growth on device when virtual devices configured")
    if device.device_type != "GPU":
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    if state.memory_growth.get(device.name, False) == bool(enable):
        return
    if state.initialized:
        raise RuntimeError("Physical devices cannot be modified after being initialized\nFix: set memory growth at "
                           "the start of the program, before creating a strategy.")
    state.memory_growth[device.name] = bool(enable)


def get_memory_growth(device: PhysicalDevice) -> bool:
    """The memory growth set for a GPU; KeyError for devices that have none (CPUs), as TF."""
    state = _state()
    device = state.check_known(device)
    if device.device_type != "GPU":
        raise KeyError(device)
    return state.memory_growth.get(device.name, False)


def get_device_details(device: PhysicalDevice) -> dict[str, Any]:
    """``{}`` for a CPU; a GPU's name and compute capability."""
    device = _state().check_known(device)
    if device.device_type != "GPU":
        return {}
    from .placement import gpu_module

    found = gpu_module()
    if found is None:  # a simulated GPU on a machine without one
        return {"device_name": "simulated GPU"}
    props = found[0].cuda.runtime.getDeviceProperties(_ordinal(device))
    name = props["name"]
    return {"device_name": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": (int(props["major"]), int(props["minor"]))}


def run_functions_eagerly(run_eagerly: bool) -> None:
    """Record TF's flag; mirrorlab's ``tf.function`` always runs eagerly, whatever it says."""
    _state().eager_functions = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    """The flag last given to ``run_functions_eagerly`` (False by default, as TF)."""
    return _state().eager_functions


def mirrored_devices() -> list[str]:
    """A bare ``MirroredStrategy()``'s devices: every visible logical GPU, else every logical CPU (as TF's
    ``all_local_devices``); initializes the devices."""
    logical = list_logical_devices()
    return [d.name for d in (_of_type(logical, "GPU") or _of_type(logical, "CPU"))]


def worker_device_type() -> tuple[str, int]:
    """A MultiWorkerMirroredStrategy worker's devices: its visible GPUs, else one CPU (virtual CPUs are not
    used, as in TF; a simulated CPU worker keeps its ``devices_per_worker``)."""
    state = _state()
    state.initialized = True
    if _of_type(state.physical, "GPU"):
        gpus = len(_of_type(state.visible, "GPU"))
        return ("GPU", gpus) if gpus else ("CPU", 1)
    return "CPU", state.default_cpus


experimental = types.SimpleNamespace(
    list_physical_devices=list_physical_devices, list_logical_devices=list_logical_devices,
    set_virtual_device_configuration=set_logical_device_configuration,
    get_virtual_device_configuration=get_logical_device_configuration,
    VirtualDeviceConfiguration=LogicalDeviceConfiguration,
    set_visible_devices=set_visible_devices, get_visible_devices=get_visible_devices,
    set_memory_growth=set_memory_growth, get_memory_growth=get_memory_growth,
    get_device_details=get_device_details)
