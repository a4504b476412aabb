"""Task roles in a multi-worker cluster: TF's ``multi_worker_util`` checks, ids, chief and leaders.

Every function takes a ``ClusterSpec`` or a cluster dict and raises TF 2.21's ``ValueError`` texts in
TF's order. Where TF fails late or obscurely, mirrorlab fails early and clearly instead; each such
divergence is listed in the docstring of the function that makes it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from mirrorlab.cluster.spec import ClusterDict, ClusterSpec

__all__ = [
    "ALLOWED_TASK_TYPES", "WorkerRole", "normalize_cluster_spec", "validate_cluster_spec", "is_chief",
    "worker_count", "id_in_cluster", "collective_leader", "coordination_leader", "worker_role",
]

#: Job names a multi-worker cluster may use; ``None`` is the "no task" type.
ALLOWED_TASK_TYPES = ("chief", "worker", "evaluator", "ps", None)

_MISSING_TASK = "When `cluster_spec` is given, you must also specify `task_type` and `task_id`."


def normalize_cluster_spec(cluster_spec: ClusterSpec | ClusterDict) -> ClusterSpec:
    """Returns ``cluster_spec`` as a ``ClusterSpec`` (a dict is converted; anything else is an error)."""
    if isinstance(cluster_spec, dict):
        return ClusterSpec(cluster_spec)
    if not isinstance(cluster_spec, ClusterSpec):
        raise ValueError("`cluster_spec' should be dict or a `tf.train.ClusterSpec` or a "
                         "`tf.train.ClusterDef` object")
    return cluster_spec


def validate_cluster_spec(cluster_spec: ClusterSpec | ClusterDict, task_type: str | None,
                          task_id: int | None) -> None:
    """Checks the job names, the task type, at most one chief and one evaluator, and the task id, as TF.

    ``task_type=None`` passes (TF's "no task"), and an ``evaluator`` may be missing from the cluster.
    Divergences from TF: a negative ``task_id`` raises ``ValueError`` (TF accepts it and fails later with
    ``InvalidArgumentError: Invalid device filter: /job:worker/task:-1``); a ``task_type`` without a
    ``task_id`` raises MWMS's "When `cluster_spec` is given..." ``ValueError`` (TF: ``TypeError: '>=' not
    supported ...``, or nothing for an evaluator); a non-integer ``task_id`` raises a ``TypeError`` naming
    it; a job with no tasks raises ``ValueError`` (TF accepts ``"chief": []``, then makes no task chief and
    names the missing ``/job:chief/replica:0/task:0`` collective leader).
    """
    cluster = normalize_cluster_spec(cluster_spec)
    if any(job not in ALLOWED_TASK_TYPES for job in cluster.jobs):
        raise ValueError(f"Disallowed task type found in cluster spec. Allowed types are {ALLOWED_TASK_TYPES} "
                         f"and the cluster spec is {cluster}.")
    if task_type not in ALLOWED_TASK_TYPES:
        raise ValueError(f"Unrecognized task_type: {task_type}, valid task types are: {ALLOWED_TASK_TYPES}")
    if task_type and task_type not in cluster.jobs and task_type != "evaluator":
        raise ValueError("`task_type` %r not found in cluster_spec." % task_type)
    for job in ("chief", "evaluator"):
        if job in cluster.jobs and cluster.num_tasks(job) > 1:
            raise ValueError(f"There must be at most one {job!r} job.")
    if task_type is not None and task_id is None:
        raise ValueError(_MISSING_TASK)
    if task_id is not None:
        _check_task_id(cluster, task_type, task_id)
    if task_type in cluster.jobs and task_id >= cluster.num_tasks(task_type):
        raise ValueError("The `task_id` %d exceeds the maximum id of %s." % (task_id, task_type))
    for job in cluster.jobs:
        if not cluster.num_tasks(job):
            raise ValueError(f"The {job!r} job in the cluster spec {cluster} has no tasks. List its task "
                             f"addresses or remove the job.")


def _check_task_id(cluster: ClusterSpec, task_type: str | None, task_id: object) -> None:
    """Rejects a non-integer or negative ``task_id`` with a message naming the valid range."""
    count = cluster.num_tasks(task_type) if task_type in cluster.jobs else None
    valid = f"an integer in [0, {count}) for job {task_type!r}" if count is not None else "a non-negative integer"
    try:
        operator.index(task_id)
    except TypeError:
        raise TypeError(f"`task_id` must be an integer, got {task_id!r} of type {type(task_id).__name__}. "
                        f"Set task.index in TF_CONFIG, or the resolver's task_id, to {valid}.") from None
    if task_id < 0:
        raise ValueError(f"The `task_id` {task_id} is negative; task ids count from 0 within each job. "
                         f"Set task.index in TF_CONFIG, or the resolver's task_id, to {valid}.")


def is_chief(cluster_spec: ClusterSpec | ClusterDict, task_type: str | None, task_id: int | None) -> bool:
    """Whether the task is chief: the chief, any evaluator, or worker 0 when there is no chief job."""
    validate_cluster_spec(cluster_spec, task_type, task_id)
    if task_type in ("chief", "evaluator"):
        return True
    return "chief" not in normalize_cluster_spec(cluster_spec).jobs and task_type == "worker" and task_id == 0


def worker_count(cluster_spec: ClusterSpec | ClusterDict, task_type: str | None) -> int:
    """The number of workers the task trains with: |chief| + |worker|, or |evaluator| for an evaluator.

    Divergence: an evaluator whose job is missing from the cluster raises a ``ValueError`` saying to add
    it (TF: ``KeyError: 'evaluator'``).
    """
    validate_cluster_spec(cluster_spec, task_type, task_id=0)
    cluster = normalize_cluster_spec(cluster_spec)
    if task_type not in ("chief", "worker", "evaluator"):
        raise ValueError("Unexpected `task_type` %r" % task_type)
    if task_type == "evaluator":
        if "evaluator" not in cluster.jobs:
            raise ValueError(f"The 'evaluator' job is missing from the cluster spec {cluster}, so the evaluator's "
                             f"worker count is unknown. Add the evaluator's own job to the cluster, e.g. "
                             f'"evaluator": ["host:port"].')
        return cluster.num_tasks("evaluator")
    return sum(cluster.num_tasks(job) for job in ("chief", "worker") if job in cluster.jobs)


def id_in_cluster(cluster_spec: ClusterSpec | ClusterDict, task_type: str | None, task_id: int | None) -> int:
    """The task's unique id among its workers (its input pipeline id): chief 0, worker i is i + |chief|.

    An evaluator keeps its task id (it forms its own cluster); other types have no id.
    """
    validate_cluster_spec(cluster_spec, task_type, task_id)
    if task_type == "chief":
        return 0
    if task_type == "worker":
        cluster = normalize_cluster_spec(cluster_spec)
        return task_id + (cluster.num_tasks("chief") if "chief" in cluster.jobs else 0)
    if task_type == "evaluator":
        return task_id
    raise ValueError("There is no id for task_type %r" % task_type)


def collective_leader(cluster_spec: ClusterSpec | ClusterDict, task_type: str | None,
                      task_id: int | None) -> str:
    """The device name of the task that leads collective ops: chief 0, else worker 0; ``''`` if none needed.

    ``''`` for an empty (local) cluster and for an evaluator. Divergence: a cluster with neither chief
    nor worker raises ``ValueError`` (TF: a bare ``AssertionError``).
    """
    cluster = normalize_cluster_spec(cluster_spec)
    if not cluster:
        return ""
    validate_cluster_spec(cluster, task_type, task_id)
    if task_type == "evaluator":
        return ""
    return _first_task_of(cluster, ("chief", "worker"), "collective ops")


def coordination_leader(cluster_spec: ClusterSpec | ClusterDict) -> str:
    """The task leading the coordination service: ps 0, else chief 0, else worker 0; ``''`` when local.

    Divergence: a cluster with none of those jobs raises ``ValueError`` (TF: a bare ``AssertionError``).
    """
    cluster = normalize_cluster_spec(cluster_spec)
    if not cluster:
        return ""
    return _first_task_of(cluster, ("ps", "chief", "worker"), "the coordination service")


def _first_task_of(cluster: ClusterSpec, jobs: tuple[str, ...], what: str) -> str:
    """``/job:J/replica:0/task:0`` for the first of ``jobs`` present in ``cluster``."""
    for job in jobs:
        if job in cluster.jobs:
            return f"/job:{job}/replica:0/task:0"
    raise ValueError(f"The cluster spec {cluster} has no {' or '.join(map(repr, jobs))} job to lead {what}. "
                     f"Add a 'worker' job (and optionally one 'chief') to the cluster.")


@dataclass(frozen=True)
class WorkerRole:
    """One task's place in a MultiWorkerMirroredStrategy cluster, as TF's MWMS derives it at startup."""

    task_type: str | None
    task_id: int | None
    id_in_cluster: int  # input_pipeline_id; replica ids start at id_in_cluster * local replicas
    num_workers: int  # num_input_pipelines
    is_chief: bool
    collective_leader: str


def worker_role(cluster_spec: ClusterSpec | ClusterDict, task_type: str | None,
                task_id: int | None) -> WorkerRole:
    """Validates a task as MWMS does when created (same checks, order and texts) and returns its role.

    An empty cluster is TF's single-worker (local) mode: id 0 of 1 worker, chief, no leader. Otherwise
    a missing ``task_type`` or ``task_id`` raises "When `cluster_spec` is given, you must also specify
    `task_type` and `task_id`.", then ``id_in_cluster`` and ``worker_count`` checks follow, as in TF.
    """
    cluster = normalize_cluster_spec(cluster_spec)
    if not cluster:
        return WorkerRole(None, None, id_in_cluster=0, num_workers=1, is_chief=True, collective_leader="")
    if task_type is None or task_id is None:
        raise ValueError(_MISSING_TASK)
    index = id_in_cluster(cluster, task_type, task_id)
    return WorkerRole(task_type, task_id, id_in_cluster=index, num_workers=worker_count(cluster, task_type),
                      is_chief=is_chief(cluster, task_type, task_id),
                      collective_leader=collective_leader(cluster, task_type, task_id))
