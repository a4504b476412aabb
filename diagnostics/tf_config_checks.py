"""Static checks of one TF_CONFIG's structure: keys, sections, jobs, this task's type and index, and roles.

Each ``check_*`` function is one unit: it takes the decoded TF_CONFIG and its tolerant view and returns findings.
The texts follow TF 2.21's rules for MultiWorkerMirroredStrategy (see the reference notes, section 8).
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Mapping

from mirrorlab.cluster.tf_config import TF_CONFIG_EXAMPLE
from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.tf_config_parse import WRONG_TYPE, json_kind
from mirrorlab.diagnostics.tf_config_view import TFConfigView, as_index, task_label

__all__ = [
    "MISSPELLED_KEY", "UNKNOWN_KEY", "MISSING_CLUSTER", "MISSING_TASK", "UNKNOWN_TASK_TYPE", "INDEX_NOT_INTEGER",
    "INDEX_OUT_OF_RANGE", "TASK_NOT_IN_CLUSTER", "EMPTY_JOB", "SEVERAL_CHIEFS", "EVALUATOR_MISUSE", "PS_JOB",
    "NO_WORKERS", "SINGLE_WORKER", "SPARSE_JOB", "Check", "STRUCTURE_CHECKS",
    "check_keys", "check_sections", "check_jobs", "check_task", "check_roles",
]

MISSPELLED_KEY = register_code("ML-CFG-004", "a TF_CONFIG key is misspelled (TensorFlow ignores it)",
                               invalid_config=True)
UNKNOWN_KEY = register_code("ML-CFG-005", "a TF_CONFIG key is unknown (TensorFlow ignores it)")
MISSING_CLUSTER = register_code("ML-CFG-006", "TF_CONFIG has a task but no cluster (it runs single-worker)",
                                invalid_config=True)
MISSING_TASK = register_code("ML-CFG-007", "TF_CONFIG has a cluster but no complete task (type and index)",
                             invalid_config=True)
UNKNOWN_TASK_TYPE = register_code("ML-CFG-008", "a job or task type is not chief, worker, evaluator or ps",
                                  invalid_config=True)
INDEX_NOT_INTEGER = register_code("ML-CFG-009", "a task index is not an integer", invalid_config=True)
INDEX_OUT_OF_RANGE = register_code("ML-CFG-010", "the task index is outside its job", invalid_config=True)
TASK_NOT_IN_CLUSTER = register_code("ML-CFG-011", "the task type has no job in the cluster", invalid_config=True)
EMPTY_JOB = register_code("ML-CFG-012", "a job lists no tasks", invalid_config=True)
SEVERAL_CHIEFS = register_code("ML-CFG-013", "the cluster has more than one chief", invalid_config=True)
EVALUATOR_MISUSE = register_code("ML-CFG-014", "the evaluator is configured the wrong way", invalid_config=True)
PS_JOB = register_code("ML-CFG-015", "a ps job or task (MultiWorkerMirroredStrategy has no parameter servers)",
                       invalid_config=True)
NO_WORKERS = register_code("ML-CFG-016", "the cluster has no chief or worker job", invalid_config=True)
SINGLE_WORKER = register_code("ML-CFG-017", "no cluster: this process trains single-worker")
SPARSE_JOB = register_code("ML-CFG-018", "a chief or worker job's task indices have gaps", invalid_config=True)

TASK_TYPES = ("chief", "worker", "evaluator", "ps")
TOP_LEVEL_KEYS = ("cluster", "task", "rpc_layer", "session_master", "environment")
TASK_KEYS = ("type", "index")

#: One static check: the decoded TF_CONFIG and its view in, findings out.
Check = Callable[[Mapping[str, Any], TFConfigView], list[Finding]]


def check_keys(config: Mapping[str, Any], view: TFConfigView) -> list[Finding]:
    """Keys TensorFlow does not read: a near miss of a known key (``clsuter``) is an error, others a warning."""
    findings = _unknown_keys(config, TOP_LEVEL_KEYS, "TF_CONFIG", view)
    task = config.get("task")
    if isinstance(task, dict):
        findings += _unknown_keys(task, TASK_KEYS, 'TF_CONFIG["task"]', view)
    return findings


def _unknown_keys(obj: Mapping[str, Any], known: tuple[str, ...], where: str, view: TFConfigView) -> list[Finding]:
    findings = []
    for key in obj:
        if key in known:
            continue
        close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.6)
        if close and close[0] not in obj:
            findings.append(Finding(
                MISSPELLED_KEY, Severity.ERROR, view.own_task, f"{where} has key {key!r}; did you mean {close[0]!r}?",
                f"{view.source}: keys {sorted(obj)}", f"Rename {key!r} to {close[0]!r}: TensorFlow ignores {key!r}"
                + (" and, with no cluster, silently trains single-worker." if close[0] == "cluster" else ".")))
        else:
            findings.append(Finding(
                UNKNOWN_KEY, Severity.WARNING, view.own_task, f"{where} has key {key!r}, which TensorFlow does not read",
                f"{view.source}: known keys are {list(known)}", f"Remove {key!r} or move its value where TensorFlow "
                f"reads it."))
    return findings


def check_sections(config: Mapping[str, Any], view: TFConfigView) -> list[Finding]:
    """``cluster`` and ``task``: present together, each a JSON object, the task with a string type and an index;
    ``rpc_layer``, ``session_master`` and ``environment`` strings."""
    findings = []
    for key in ("cluster", "task"):
        if key in config and not isinstance(config[key], dict):
            findings.append(_wrong_type(view, f'TF_CONFIG["{key}"]', config[key], "an object",
                                        f"Write {key} as in {TF_CONFIG_EXAMPLE}."))
    for key in ("rpc_layer", "session_master", "environment"):
        if config.get(key) is not None and not isinstance(config[key], str):
            findings.append(_wrong_type(view, f'TF_CONFIG["{key}"]', config[key], "a string",
                                        f'Write {key} as a string (e.g. "rpc_layer": "grpc") or leave it out.'))
    cluster, task = config.get("cluster"), config.get("task")
    if "cluster" not in config or cluster == {}:
        if "task" in config:
            findings.append(Finding(
                MISSING_CLUSTER, Severity.ERROR, view.own_task,
                "TF_CONFIG names a task but " + ("no cluster" if "cluster" not in config else "an empty cluster"),
                f"{view.source}: keys {sorted(config)}", "Add every task's address under \"cluster\" (the same on all "
                "workers); without it TensorFlow silently trains single-worker."))
        else:
            findings.append(Finding(SINGLE_WORKER, Severity.INFO, (), "TF_CONFIG has no cluster: single-worker mode",
                                    f"{view.source}: keys {sorted(config)}", f"For multi-worker training set TF_CONFIG "
                                    f"on every worker, like {TF_CONFIG_EXAMPLE}."))
    elif isinstance(cluster, dict) and not isinstance(task, dict) and "task" not in config:
        findings.append(_missing_task(view, "no \"task\""))
    if isinstance(task, dict):
        missing = [key for key in TASK_KEYS if key not in task or task[key] is None]
        if missing and isinstance(cluster, dict) and cluster:
            findings.append(_missing_task(view, f"no task {' or '.join(missing)}"))
        if "type" in task and task["type"] is not None and not isinstance(task["type"], str):
            findings.append(_wrong_type(view, 'TF_CONFIG["task"]["type"]', task["type"], "a string",
                                        'Set "type" to "chief", "worker" or "evaluator".'))
    return findings


def _missing_task(view: TFConfigView, what: str) -> Finding:
    return Finding(MISSING_TASK, Severity.ERROR, view.own_task, f"TF_CONFIG has a cluster but {what}",
                   f"{view.source}: task = {view.raw.get('task')!r}", 'Add "task": {"type": "worker", "index": N} '
                   "naming this process's own entry in the cluster (N differs on every worker).")


def _wrong_type(view: TFConfigView, where: str, value: object, expected: str, fix: str) -> Finding:
    return Finding(WRONG_TYPE, Severity.ERROR, view.own_task, f"{where} must be {expected}, not a JSON {json_kind(value)}",
                   f"{view.source}: {where} = {_short(value)}", fix)


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_jobs(config: Mapping[str, Any], view: TFConfigView) -> list[Finding]:
    """Every job: an allowed name, its tasks a list or {index: address}, indices non-negative integers, addresses
    strings, and at least one task."""
    cluster = config.get("cluster")
    if not isinstance(cluster, dict):
        return []
    findings = []
    for job, tasks in cluster.items():
        if job not in TASK_TYPES:
            findings.append(_unknown_type(view, f"job {job!r} in the cluster", job))
        where = f'TF_CONFIG["cluster"][{job!r}]'
        if isinstance(tasks, list):
            entries = list(enumerate(tasks))
        elif isinstance(tasks, dict):
            entries = list(tasks.items())
            for key in tasks:
                index = as_index(key)
                if index is None or index < 0:
                    findings.append(Finding(
                        INDEX_NOT_INTEGER, Severity.ERROR, (task_label(job, None),),
                        f"{where} has task key {key!r}, which is not a non-negative integer",
                        f"{view.source}: {where} = {_short(tasks)}", f'Key {job!r}\'s tasks by "0", "1", ... or list '
                        "its addresses in index order."))
        else:
            findings.append(_wrong_type(view, where, tasks, "a list of \"host:port\" strings",
                                        f'Write "{job}": ["host0:2222", "host1:2222"].'))
            continue
        if not entries:
            findings.append(Finding(EMPTY_JOB, Severity.ERROR, (job,), f"job {job!r} lists no tasks",
                                    f"{view.source}: {where} = {_short(tasks)}",
                                    f"List the {job} task's address or remove the {job!r} job."))
        for key, address in entries:
            if not isinstance(address, str):
                findings.append(_wrong_type(view, f"{where}[{key!r}]", address, 'a "host:port" string',
                                            f"Write the address of {task_label(job, as_index(key))} as \"host:port\"."))
    return findings


def _unknown_type(view: TFConfigView, what: str, name: str) -> Finding:
    lowered = name.lower()
    if lowered in TASK_TYPES:
        fix = f"Write {lowered!r}: task types are lower case."
    elif lowered == "master":
        fix = "Use 'chief' (TF 1's 'master' is not allowed by MultiWorkerMirroredStrategy)."
    else:
        fix = f"Use one of {list(TASK_TYPES[:3])}."
    return Finding(UNKNOWN_TASK_TYPE, Severity.ERROR, view.own_task, f"{what} is not one of {list(TASK_TYPES)}",
                   f"{view.source}: {name!r}", fix)


def check_task(config: Mapping[str, Any], view: TFConfigView) -> list[Finding]:
    """This task: a known type that has a job in the cluster, and an integer index inside that job."""
    task = config.get("task")
    if not isinstance(task, dict):
        return []
    findings = []
    task_type = view.task_type
    if task_type is not None and task_type not in TASK_TYPES:
        findings.append(_unknown_type(view, f"task type {task_type!r}", task_type))
    if "index" in task and task["index"] is not None:
        findings += _index_findings(view, task["index"])
    if task_type in view.jobs and view.task_index is not None:
        count = len(view.jobs[task_type])
        if view.task_index not in view.jobs[task_type] and view.jobs[task_type]:
            findings.append(Finding(
                INDEX_OUT_OF_RANGE, Severity.ERROR, view.own_task,
                f"task index {view.task_index} is outside job {task_type!r}, which has {count} task(s)",
                f"{view.source}: indices of {task_type!r} are {sorted(view.jobs[task_type])}",
                f"Set task.index to this process's position in cluster[{task_type!r}] (0 to {count - 1})."))
    elif view.task_index is not None and view.task_index < 0:
        findings.append(Finding(INDEX_OUT_OF_RANGE, Severity.ERROR, view.own_task,
                                f"task index {view.task_index} is negative", f"{view.source}: task = {task!r}",
                                "Task indices count from 0 within each job."))
    if task_type in ("chief", "worker") and isinstance(config.get("cluster"), dict) and config["cluster"] \
            and task_type not in config["cluster"]:
        findings.append(Finding(
            TASK_NOT_IN_CLUSTER, Severity.ERROR, view.own_task, f"task type {task_type!r} has no job in the cluster",
            f"{view.source}: cluster jobs are {list(config['cluster'])}",
            f"Add this task's address under cluster[{task_type!r}] or correct task.type."))
    return findings


def _index_findings(view: TFConfigView, index: object) -> list[Finding]:
    """Findings for a task.index that TensorFlow's ``int()`` reads with a surprise or not at all."""
    where = 'TF_CONFIG["task"]["index"]'
    if isinstance(index, bool):
        problem, severity = f"is the boolean {str(index).lower()}, which TensorFlow reads as {int(index)}", Severity.ERROR
    elif isinstance(index, float) and as_index(index) is None:
        problem, severity = f"is {index!r}, which TensorFlow truncates without a word", Severity.ERROR
    elif isinstance(index, (float, str)) and as_index(index) is not None:
        problem, severity = f"is {index!r}, not the integer {as_index(index)} (TensorFlow accepts it)", Severity.WARNING
    elif isinstance(index, int):
        return []
    else:
        problem, severity = f"is {_short(index)}, which is not an integer", Severity.ERROR
    return [Finding(INDEX_NOT_INTEGER, severity, view.own_task, f"{where} {problem}",
                    f"{view.source}: task = {_short(view.raw.get('task'))}",
                    "Write the index as a plain JSON integer, e.g. \"index\": 0.")]


def check_roles(config: Mapping[str, Any], view: TFConfigView) -> list[Finding]:
    """Cluster-wide roles: at most one chief, evaluator rules, no ps, and some chief or worker to train."""
    if not view.jobs:
        return []
    findings = []
    chiefs = view.jobs.get("chief", {})
    if len(chiefs) > 1:
        findings.append(Finding(SEVERAL_CHIEFS, Severity.ERROR, tuple(task_label("chief", i) for i in chiefs),
                                f"the chief job lists {len(chiefs)} tasks; there must be at most one chief",
                                f"{view.source}: chief = {list(chiefs.values())}",
                                "Keep one chief and move the other addresses into the 'worker' job."))
    findings += _evaluator_findings(view)
    if "ps" in view.jobs or view.task_type == "ps":
        findings.append(Finding(
            PS_JOB, Severity.ERROR, view.own_task if view.task_type == "ps" else ("ps",),
            "MultiWorkerMirroredStrategy has no parameter servers, but TF_CONFIG has a 'ps' "
            + ("task" if view.task_type == "ps" else "job"), f"{view.source}: jobs {list(view.jobs)}",
            "Remove the 'ps' job (use ParameterServerStrategy for parameter servers)."))
    for job in ("chief", "worker"):
        indices = sorted(view.jobs.get(job, {}))
        if indices and indices != list(range(len(indices))):
            findings.append(Finding(
                SPARSE_JOB, Severity.ERROR, tuple(task_label(job, i) for i in indices),
                f"job {job!r} has task indices {indices}, not 0 to {len(indices) - 1}",
                f"{view.source}: cluster[{job!r}] = {view.jobs[job]}", "MultiWorkerMirroredStrategy numbers "
                f"its workers 0..n-1 and rejects an index >= n: list all {job} addresses in index order."))
    if not any(job in view.jobs for job in ("chief", "worker")) and view.task_type != "evaluator":
        findings.append(Finding(NO_WORKERS, Severity.ERROR, view.own_task, "the cluster has no chief or worker job",
                                f"{view.source}: jobs {list(view.jobs)}",
                                "List the training tasks under 'worker' (and optionally one 'chief')."))
    return findings


def _evaluator_findings(view: TFConfigView) -> list[Finding]:
    evaluators = view.jobs.get("evaluator", {})
    problems = []
    if len(evaluators) > 1:
        problems.append((f"the evaluator job lists {len(evaluators)} tasks; there must be at most one",
                         "Keep one evaluator; run further evaluations one after another."))
    if view.task_type == "evaluator" and "evaluator" not in view.jobs:
        problems.append(("this task is the evaluator but the cluster has no 'evaluator' job",
                         'Add the evaluator\'s own address, e.g. "evaluator": ["host:2222"] (TensorFlow fails with '
                         "KeyError: 'evaluator')."))
    return [Finding(EVALUATOR_MISUSE, Severity.ERROR, view.own_task or ("evaluator",), message,
                    f"{view.source}: evaluator = {list(evaluators.values())}", fix) for message, fix in problems]


#: The structure checks, in the order they run.
STRUCTURE_CHECKS: tuple[Check, ...] = (check_keys, check_sections, check_jobs, check_task, check_roles)
