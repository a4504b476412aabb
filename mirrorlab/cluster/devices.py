"""Device strings as TF writes them (``/job:worker/replica:0/task:1/device:GPU:0``, ``/gpu:0``): parsed, made
canonical, and checked to be on this process's task."""

from __future__ import annotations

import re

from .. import errors

__all__ = ["canonical_device", "local_device"]

_DEVICE_RE = re.compile(r"^(?:/job:(?P<job>[^/]+))?(?:/replica:(?P<replica>\d+))?(?:/task:(?P<task>\d+))?/?(?:device:)?"
                        r"(?P<type>[A-Za-z]+):(?P<index>\d+)$")
_LOCAL_TASK = "/job:localhost/replica:0/task:0"


def _parsed_device(spec: str) -> re.Match:
    """``spec`` split into job, replica, task, type and index; ValueError unless it names a CPU or GPU."""
    match = _DEVICE_RE.match(spec.strip())
    if not match or match["type"].upper() not in ("CPU", "GPU"):
        raise ValueError(f"Invalid device {spec!r}: expected a CPU or GPU device such as '/gpu:0' or "
                         f"'{_LOCAL_TASK}/device:CPU:0'.")
    return match


def canonical_device(spec: str, prefix: str = _LOCAL_TASK) -> str:
    """``"/gpu:1"`` -> ``"/job:localhost/replica:0/task:0/device:GPU:1"`` (the job, replica and task given are
    replaced by ``prefix``)."""
    return _device_name(_parsed_device(spec), prefix)


def _device_name(match: re.Match, task_name: str) -> str:
    """The full name of a parsed device on ``task_name``."""
    return f"{task_name}/device:{match['type'].upper()}:{int(match['index'])}"


def local_device(spec: str) -> str:
    """A strategy's device (``canonical_device``), which must be on this process's task as TF requires: a remote
    job needs a task, and any other job, replica or task is TF's unknown device."""
    match = _parsed_device(spec)
    job, replica, task = match["job"] or "localhost", int(match["replica"] or 0), match["task"]
    task_name = f"/job:{job}/replica:{replica}/task:{int(task or 0)}"
    full = _device_name(match, task_name)
    if job != "localhost" and task is None:
        raise ValueError(f"Remote device string must have task specified.E.g. 'task:0' in {full}\nFix: use this "
                         "machine's devices, e.g. '/gpu:0'; other workers' devices come from TF_CONFIG under "
                         "MultiWorkerMirroredStrategy.")
    if task_name != _LOCAL_TASK:
        raise errors.InvalidArgumentError(f"{full} unknown device.\nFix: MirroredStrategy uses this process's "
                                          "devices, e.g. '/gpu:0'; use MultiWorkerMirroredStrategy for other tasks.")
    return full
