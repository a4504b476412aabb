"""Which GPUs a real worker uses: ``mirrorlab launch --gpus-per-worker N`` gives worker ``i`` its own slice of the
host's GPUs (``CUDA_VISIBLE_DEVICES``, as one TF worker process per GPU set is run) and tells it N; a worker then
has N GPU devices, each replica's arrays on its own GPU (``mirrorlab.placement``). CuPy is never imported here."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["GPUS_VAR", "VISIBLE_VAR", "gpus_per_worker", "gpu_slice", "visible_devices_for", "check_visible",
           "launch_gpu_envs"]

GPUS_VAR = "MIRRORLAB_GPUS_PER_WORKER"
VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"


def gpus_per_worker(environ: Mapping[str, str] = os.environ) -> int | None:
    """The GPUs per worker ``mirrorlab launch --gpus-per-worker`` set (None when unset or 0)."""
    raw = environ.get(GPUS_VAR, "")
    if not raw:
        return None
    if not raw.isdigit():
        raise ValueError(f"{GPUS_VAR}={raw!r} is not a whole number of GPUs. Fix: e.g. {GPUS_VAR}=1, or unset it.")
    return int(raw) or None


def gpu_slice(worker: int, per_worker: int, host_gpus: int) -> list[int]:
    """The host GPU ordinals worker ``worker`` gets: consecutive slices, wrapping round when the workers need more
    GPUs than the host has (then workers share GPUs, each worker's own GPUs distinct)."""
    if per_worker < 1 or host_gpus < 1:
        raise ValueError(f"gpu_slice needs per_worker >= 1 and host_gpus >= 1; got {per_worker} and {host_gpus}")
    if per_worker > host_gpus:
        raise ValueError(f"--gpus-per-worker={per_worker} but this host has {host_gpus} GPU(s) visible. Fix: ask "
                         f"for at most {host_gpus} GPU(s) per worker.")
    return [(worker * per_worker + k) % host_gpus for k in range(per_worker)]


def visible_devices_for(worker: int, per_worker: int, host_gpus: int, parent_visible: str | None) -> str:
    """Worker ``worker``'s ``CUDA_VISIBLE_DEVICES``: its slice, read through the launcher's own list if it has one."""
    names = [d.strip() for d in parent_visible.split(",") if d.strip()] if parent_visible else None
    return ",".join(names[i] if names else str(i) for i in gpu_slice(worker, per_worker, host_gpus))


def check_visible(wanted: int, visible: int, task: str) -> None:
    """Fail clearly when this worker sees fewer GPUs than it was told to use."""
    if visible < wanted:
        raise ValueError(f"{GPUS_VAR}={wanted} but {task} sees {visible} GPU(s) (CuPy installed and "
                         f"{VISIBLE_VAR}={os.environ.get(VISIBLE_VAR, '<unset>')}). Fix: install CuPy for this CUDA "
                         "(pip install 'mirrorlab[cuda12]' or [cuda13]), or lower --gpus-per-worker.")


def launch_gpu_envs(workers: int, per_worker: int, host_gpus: int,
                    parent_visible: str | None) -> list[dict[str, str]]:
    """What ``mirrorlab launch --gpus-per-worker`` adds to each worker's environment ([{}...] for 0 GPUs)."""
    if not per_worker:
        return [{} for _ in range(workers)]
    if host_gpus < 1:
        raise ValueError(f"--gpus-per-worker={per_worker} but the launcher sees no GPU (CuPy missing, or "
                         f"{VISIBLE_VAR} empty). Fix: install CuPy (pip install 'mirrorlab[cuda12]' or [cuda13]) or "
                         "leave --gpus-per-worker out to run on CPUs.")
    return [{GPUS_VAR: str(per_worker), VISIBLE_VAR: visible_devices_for(w, per_worker, host_gpus, parent_visible)}
            for w in range(workers)]
