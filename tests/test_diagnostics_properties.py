"""Property tests of the static checks: valid TF_CONFIGs give no error; mutated ones give findings, never a traceback."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings, strategies as st

from mirrorlab.diagnostics.findings import Finding, Severity
from mirrorlab.diagnostics.tf_config_lint import check_tf_config, check_tf_config_set

_HOSTS = st.from_regex(r"[a-z][a-z0-9-]{0,8}[a-z0-9](\.[a-z]{2,5}){0,2}", fullmatch=True)


@st.composite
def valid_tf_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A TF_CONFIG that MultiWorkerMirroredStrategy accepts and that is safe: distinct host:port per task, hosts
    either all loopback or all remote names, at most one chief and one evaluator, task inside its job."""
    workers = draw(st.integers(1, 5))
    chief = draw(st.booleans())
    evaluator = draw(st.booleans())
    count = workers + chief + evaluator
    local = draw(st.booleans())
    hosts = ["localhost"] * count if local else draw(st.lists(_HOSTS, min_size=count, max_size=count))
    ports = draw(st.lists(st.integers(1024, 65535), min_size=count, max_size=count, unique=True))
    addresses = [f"{host}:{port}" for host, port in zip(hosts, ports)]
    cluster: dict[str, Any] = {"worker": addresses[:workers]}
    if chief:
        cluster["chief"] = [addresses[workers]]
    if evaluator:
        cluster["evaluator"] = [addresses[-1]]
    task_type = draw(st.sampled_from(sorted(cluster)))
    config = {"cluster": cluster, "task": {"type": task_type, "index": draw(st.integers(0, len(cluster[task_type]) - 1))}}
    if draw(st.booleans()):
        config["rpc_layer"] = "grpc"
    return config


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


@settings(max_examples=150, deadline=None)
@given(valid_tf_configs())
def test_valid_configs_have_no_error(config: dict[str, Any]) -> None:
    assert _errors(check_tf_config(json.dumps(config))) == []


@settings(max_examples=50, deadline=None)
@given(valid_tf_configs(), st.data())
def test_valid_config_sets_have_no_error(config: dict[str, Any], data: st.DataObject) -> None:
    tasks = [(job, i) for job, tasks in config["cluster"].items() for i in range(len(tasks))]
    items = [(f"{job}-{i}.json", json.dumps({**config, "task": {"type": job, "index": i}})) for job, i in tasks]
    assert _errors(check_tf_config_set(data.draw(st.permutations(items)))) == []


# Fresh containers each draw (``st.builds``, not ``st.just``): a mutation that nests into one must not change the
# value later examples draw, or Hypothesis sees its data generation behave differently between runs.
_ODD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 70000), st.floats(allow_nan=True),
                        st.text(max_size=12), st.builds(list), st.builds(dict), st.builds(lambda: ["h:1"]),
                        st.builds(lambda: {"1": "h:1"}))


def json_paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path (keys/indices) to a node of a decoded JSON value."""
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found += json_paths(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += json_paths(child, path + (i,))
    return found


def mutate(config: Any, data: st.DataObject) -> Any:
    """One JSON-level mutation: drop a key, replace a value (null, retyped, odd), nest it deeper, rename a key."""
    path = data.draw(st.sampled_from(json_paths(config)[1:]))
    parent = config
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    op = data.draw(st.sampled_from(["drop", "replace", "wrap_list", "wrap_dict", "stringify", "rename"]))
    if op == "drop":
        del parent[key]
    elif op == "replace":
        parent[key] = data.draw(_ODD_VALUES)
    elif op == "wrap_list":
        parent[key] = [parent[key]]
    elif op == "wrap_dict":
        parent[key] = {"value": parent[key]}
    elif op == "stringify":
        parent[key] = json.dumps(parent[key])
    elif isinstance(parent, dict):
        parent[data.draw(st.text(min_size=1, max_size=8))] = parent.pop(key)
    return config


@settings(max_examples=300, deadline=None)
@given(valid_tf_configs(), st.data())
def test_mutated_configs_never_raise(config: dict[str, Any], data: st.DataObject) -> None:
    mutated = copy.deepcopy(config)
    for _ in range(data.draw(st.integers(1, 3))):
        if isinstance(mutated, (dict, list)) and json_paths(mutated)[1:]:
            mutated = mutate(mutated, data)
    findings = check_tf_config(json.dumps(mutated))
    assert all(isinstance(f, Finding) for f in findings)


@settings(max_examples=200, deadline=None)
@given(valid_tf_configs(), st.data())
def test_text_mutations_never_raise(config: dict[str, Any], data: st.DataObject) -> None:
    text = json.dumps(config, indent=data.draw(st.sampled_from([None, 2])))
    cut = data.draw(st.integers(0, len(text)))
    text = text[:cut] + data.draw(st.text(max_size=3)) + text[cut + data.draw(st.integers(0, 3)):]
    findings = check_tf_config(text)
    assert all(isinstance(f, Finding) for f in findings)
