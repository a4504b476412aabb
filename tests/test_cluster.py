"""Tests for ``mirrorlab.cluster``: ClusterSpec, TF_CONFIG, resolvers and roles, with TF 2.21's texts verbatim."""

from __future__ import annotations

import collections
import json
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.cluster import (
    ALLOWED_TASK_TYPES,
    ClusterResolver,
    ClusterSpec,
    SimpleClusterResolver,
    TFConfigClusterResolver,
    WorkerRole,
    collective_leader,
    coordination_leader,
    id_in_cluster,
    is_chief,
    normalize_cluster_spec,
    read_tf_config,
    validate_cluster_spec,
    worker_count,
    worker_role,
)

CHIEF_2W = {"chief": ["c0:1"], "worker": ["w0:1", "w1:1"]}
TWO_WORKERS = {"worker": ["w0:1", "w1:1"]}
MISSING_TASK = "When `cluster_spec` is given, you must also specify `task_type` and `task_id`."


def verbatim(text: str) -> str:
    """A ``match=`` pattern that accepts exactly ``text``."""
    return "^" + re.escape(text) + r"\Z"


def set_tf_config(monkeypatch: pytest.MonkeyPatch, config: dict | str | None) -> None:
    """Sets TF_CONFIG to ``config`` (a dict is JSON-encoded, None unsets it)."""
    if config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", config if isinstance(config, str) else json.dumps(config))


# --------------------------------------------------------------------------------------------- ClusterSpec


class TestClusterSpec:
    def test_dense_jobs_keep_dict_order_and_lists(self):
        spec = ClusterSpec({"worker": ("w0:1", "w1:1"), "chief": ["c0:1"]})
        assert spec.jobs == ["worker", "chief"]
        assert spec.as_dict() == {"worker": ["w0:1", "w1:1"], "chief": ["c0:1"]}
        assert spec.num_tasks("worker") == 2
        assert spec.task_indices("worker") == [0, 1]
        assert spec.task_address("worker", 1) == "w1:1"
        assert spec.job_tasks("worker") == ["w0:1", "w1:1"]
        assert bool(spec)

    def test_sparse_job(self):
        spec = ClusterSpec({"worker": {3: "w3:1", 1: "w1:1"}, "chief": ["c0:1"]})
        assert spec.as_dict() == {"worker": {1: "w1:1", 3: "w3:1"}, "chief": ["c0:1"]}
        assert spec.num_tasks("worker") == 2
        assert spec.task_indices("worker") == [1, 3]
        assert spec.job_tasks("worker") == [None, "w1:1", None, "w3:1"]
        assert spec.task_address("worker", 3) == "w3:1"

    def test_sparse_keys_are_cast_with_int_like_tf_config_json(self):
        spec = ClusterSpec(json.loads('{"worker": {"1": "w1:1"}}'))
        assert spec.as_dict() == {"worker": {1: "w1:1"}}
        with pytest.raises(ValueError, match=verbatim("invalid literal for int() with base 10: 'a'")):
            ClusterSpec({"worker": {"a": "w:1"}})

    def test_sparse_but_dense_indices_become_a_list(self):
        assert ClusterSpec({"worker": {1: "b", 0: "a"}}).as_dict() == {"worker": ["a", "b"]}

    @pytest.mark.parametrize("empty", [None, {}, ClusterSpec({})])
    def test_empty(self, empty):
        spec = ClusterSpec(empty)
        assert not spec
        assert spec.jobs == [] and spec.as_dict() == {}
        assert repr(spec) == str(spec) == "ClusterSpec({})"

    def test_empty_job_is_truthy_and_has_no_tasks(self):
        spec = ClusterSpec({"worker": []})
        assert spec and spec.as_dict() == {"worker": {}}
        assert spec.num_tasks("worker") == 0 and spec.task_indices("worker") == []
        with pytest.raises(ValueError, match=r"^max\(\) arg is an empty sequence"):  # TF 2.21's job_tasks
            spec.job_tasks("worker")

    def test_copy_sorts_jobs_and_is_independent(self):
        original = ClusterSpec({"worker": ["w0:1"], "chief": ["c0:1"]})
        copy = ClusterSpec(original)
        assert copy.jobs == ["chief", "worker"]
        assert copy == original
        copy.as_dict()["worker"].append("x")
        assert original.num_tasks("worker") == 1

    def test_input_and_results_are_not_aliased(self):
        tasks = ["w0:1"]
        spec = ClusterSpec({"worker": tasks})
        tasks.append("w1:1")
        spec.as_dict()["worker"].append("w2:1")
        assert spec.as_dict() == {"worker": ["w0:1"]}

    def test_equality_compares_the_index_table_like_tf(self):
        spec = ClusterSpec({"worker": ["a"], "chief": ["c"]})
        assert spec == ClusterSpec({"chief": ["c"], "worker": {0: "a"}})
        assert spec == {"worker": {0: "a"}, "chief": {0: "c"}}
        assert spec != {"worker": ["a"], "chief": ["c"]}  # TF quirk: not equal to the list form
        assert spec != ClusterSpec({"worker": ["b"], "chief": ["c"]})
        assert spec != None  # noqa: E711
        with pytest.raises(TypeError, match="unhashable"):
            hash(spec)

    def test_repr_sorts_jobs_and_uses_as_dict(self):
        spec = ClusterSpec({"worker": {1: "a"}, "chief": ["c"]})
        assert repr(spec) == str(spec) == "ClusterSpec({'chief': ['c'], 'worker': {1: 'a'}})"

    def test_bytes_are_decoded(self):
        assert ClusterSpec({b"worker": [b"w0:1"]}).as_dict() == {"worker": ["w0:1"]}

    @pytest.mark.parametrize("cluster, error, text", [
        ({"worker": "w0:1"}, TypeError,
         "The tasks for job 'worker' must be a list or a dictionary from integers to strings."),
        ([("worker", ["w0:1"])], TypeError,
         "`cluster` must be a dictionary mapping one or more job names to lists of network addresses, "
         "or a `ClusterDef` protocol buffer"),
        ({1: ["w0:1"]}, TypeError, "Job name 1 must be bytes or unicode"),
        ({"worker": [1]}, TypeError, "Task address 1 must be bytes or unicode"),
        ({"worker": {-1: "w:1"}}, ValueError,
         "Task index -1 of job 'worker' is negative; task indices count from 0. "
         "Use a list of addresses or non-negative integer keys."),
    ])
    def test_construction_errors(self, cluster, error, text):
        with pytest.raises(error, match=verbatim(text)):
            ClusterSpec(cluster)

    @pytest.mark.parametrize("method", ["num_tasks", "task_indices", "job_tasks"])
    def test_missing_job(self, method):
        with pytest.raises(ValueError, match=verbatim("No such job in cluster: 'chief'")):
            getattr(ClusterSpec(TWO_WORKERS), method)("chief")

    def test_missing_task(self):
        spec = ClusterSpec(TWO_WORKERS)
        with pytest.raises(ValueError, match=verbatim("No such job in cluster: 'ps'")):
            spec.task_address("ps", 0)
        with pytest.raises(ValueError, match=verbatim("No task with index 3 in job 'worker'")):
            spec.task_address("worker", 3)
        with pytest.raises(ValueError, match=verbatim("No task with index '0' in job 'worker'")):
            spec.task_address("worker", "0")

    @settings(deadline=None)
    @given(st.dictionaries(
        st.sampled_from(["chief", "worker", "ps", "evaluator", "trainer"]),
        st.one_of(
            st.lists(st.text(min_size=1, max_size=8), max_size=5),
            st.dictionaries(st.integers(0, 20), st.text(min_size=1, max_size=8), max_size=5),
        ),
    ))
    def test_round_trip(self, cluster):
        spec = ClusterSpec(cluster)
        as_dict = spec.as_dict()
        assert list(as_dict) == list(cluster)
        for job, tasks in cluster.items():
            table = dict(enumerate(tasks)) if isinstance(tasks, list) else tasks
            assert spec.num_tasks(job) == len(table)
            assert spec.task_indices(job) == sorted(table)
            written = as_dict[job]
            assert (dict(enumerate(written)) if isinstance(written, list) else written) == table
            assert all(spec.job_tasks(job)[i] == address for i, address in table.items())
        assert ClusterSpec(as_dict) == spec == ClusterSpec(spec)
        assert ClusterSpec(spec).jobs == sorted(as_dict)


# ---------------------------------------------------------------------------------------------- TF_CONFIG


class TestReadTFConfig:
    def test_unset_is_empty(self, monkeypatch):
        set_tf_config(monkeypatch, None)
        assert read_tf_config() == {}

    def test_reads_at_call_time(self, monkeypatch):
        set_tf_config(monkeypatch, {"cluster": TWO_WORKERS})
        assert read_tf_config() == {"cluster": TWO_WORKERS}
        set_tf_config(monkeypatch, {"task": {"type": "worker", "index": 1}})
        assert read_tf_config() == {"task": {"type": "worker", "index": 1}}

    def test_looks_up_os_environ_on_each_call(self, monkeypatch):
        monkeypatch.setattr(os, "environ", dict(os.environ, TF_CONFIG='{"rpc_layer": "grpc"}'))
        assert read_tf_config() == {"rpc_layer": "grpc"}

    @pytest.mark.parametrize("raw, tf_text", [
        ("", "Expecting value: line 1 column 1 (char 0)"),
        ("{bad", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ('{"cluster": ', "Expecting value: line 1 column 13 (char 12)"),
    ])
    def test_invalid_json_keeps_tf_error_and_explains(self, monkeypatch, raw, tf_text):
        set_tf_config(monkeypatch, raw)
        with pytest.raises(json.JSONDecodeError) as info:
            read_tf_config()
        assert isinstance(info.value, ValueError)
        first, explanation = str(info.value).split("\n")
        assert first == tf_text
        assert explanation.startswith("TF_CONFIG is not valid JSON: ")
        assert explanation.endswith('Set TF_CONFIG to a JSON object like {"cluster": {"worker": ["host0:12345", '
                                    '"host1:12345"]}, "task": {"type": "worker", "index": 0}} or unset it for '
                                    "single-worker mode.")

    def test_empty_string_says_it_is_empty(self, monkeypatch):
        set_tf_config(monkeypatch, "")
        with pytest.raises(ValueError, match="it is set but holds no JSON value"):
            read_tf_config()

    def test_python_repr_gets_the_double_quote_hint(self, monkeypatch):
        set_tf_config(monkeypatch, str({"cluster": TWO_WORKERS}))
        with pytest.raises(ValueError, match=re.escape("write the value with json.dumps(config), not str(config)")):
            read_tf_config()

    def test_huge_value_is_quoted_only_near_the_error(self, monkeypatch):
        raw = json.dumps({"cluster": {"worker": [f"host{i}:2222" for i in range(2000)]}})[:-1]
        set_tf_config(monkeypatch, raw)
        with pytest.raises(json.JSONDecodeError) as info:
            read_tf_config()
        assert len(str(info.value)) < 600
        assert f"({len(raw)} characters in all)" in str(info.value)

    @pytest.mark.parametrize("raw, kind", [("[1]", "array"), ("null", "null"), ("5", "number"),
                                           ('"x"', "string"), ("true", "boolean")])
    def test_non_object_json(self, monkeypatch, raw, kind):
        set_tf_config(monkeypatch, raw)
        with pytest.raises(ValueError, match=re.escape(
                f"TF_CONFIG must be a JSON object, but it holds a JSON {kind}: TF_CONFIG={raw!r}.")):
            read_tf_config()


# ---------------------------------------------------------------------------------------------- resolvers


class TestTFConfigClusterResolver:
    def test_unset_is_single_worker(self, monkeypatch):
        set_tf_config(monkeypatch, None)
        resolver = TFConfigClusterResolver()
        assert isinstance(resolver, ClusterResolver)
        assert resolver.cluster_spec() == ClusterSpec({}) and not resolver.cluster_spec()
        assert (resolver.task_type, resolver.task_id, resolver.rpc_layer, resolver.environment) == (
            None, None, None, None)
        assert resolver.master() == ""
        assert resolver.num_accelerators() == {}

    def test_num_accelerators_counts_local_gpus_in_a_defaultdict(self, monkeypatch):
        """As TF's: the process's logical accelerators in a defaultdict(int) (so ["GPU"] is 0 without GPUs); with
        a task type and id only that task's devices, which local ones are not."""
        set_tf_config(monkeypatch, {"cluster": TWO_WORKERS, "task": {"type": "worker", "index": 0}})
        resolver = TFConfigClusterResolver()
        counts = resolver.num_accelerators()
        assert isinstance(counts, collections.defaultdict)
        assert counts["GPU"] == len(ml.config.list_logical_devices("GPU"))
        assert resolver.num_accelerators("worker", 0) == {}

    def test_reads_fields_with_tf_casts_and_ignores_environment(self, monkeypatch):
        set_tf_config(monkeypatch, {"cluster": TWO_WORKERS, "task": {"type": "worker", "index": "1"},
                                    "rpc_layer": "grpc", "environment": "cloud"})
        resolver = TFConfigClusterResolver()
        assert resolver.cluster_spec().as_dict() == TWO_WORKERS
        assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ("worker", 1, "grpc")
        assert resolver.environment is None
        set_tf_config(monkeypatch, {"task": {"type": 5, "index": 2.9}})
        assert (resolver.task_type, resolver.task_id) == ("5", 2)

    def test_rereads_tf_config_on_every_access(self, monkeypatch):
        resolver = TFConfigClusterResolver()
        set_tf_config(monkeypatch, {"cluster": CHIEF_2W, "task": {"type": "chief", "index": 0}})
        assert resolver.task_type == "chief" and resolver.cluster_spec().num_tasks("worker") == 2
        set_tf_config(monkeypatch, {"cluster": TWO_WORKERS, "task": {"type": "worker", "index": 1}})
        assert resolver.task_type == "worker" and resolver.task_id == 1
        assert resolver.cluster_spec().jobs == ["worker"]

    def test_constructor_overrides_and_setters(self, monkeypatch):
        set_tf_config(monkeypatch, {"task": {"type": "worker", "index": 0}, "rpc_layer": "grpc"})
        resolver = TFConfigClusterResolver(task_type=7, task_id="3", rpc_layer="x", environment="google")
        assert (resolver.task_type, resolver.task_id, resolver.rpc_layer, resolver.environment) == (
            "7", 3, "x", "google")
        resolver.task_type = resolver.task_id = resolver.rpc_layer = None
        assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ("worker", 0, "grpc")
        resolver.task_id = 4
        assert resolver.task_id == 4

    def test_master(self, monkeypatch):
        resolver = TFConfigClusterResolver()
        set_tf_config(monkeypatch, {"cluster": TWO_WORKERS, "task": {"type": "worker", "index": 1},
                                    "rpc_layer": "grpc"})
        assert resolver.master() == "grpc://w1:1"
        assert resolver.master("worker", 0) == "grpc://w0:1"
        assert resolver.master("worker", 0, "foo") == "foo://w0:1"
        assert resolver.master(rpc_layer="") == "w1:1"
        set_tf_config(monkeypatch, {"cluster": TWO_WORKERS, "task": {"type": "worker", "index": 1}})
        assert resolver.master() == "w1:1"

    def test_master_of_single_task_cluster_or_session_master(self, monkeypatch):
        resolver = TFConfigClusterResolver()
        set_tf_config(monkeypatch, {"cluster": {"worker": ["w0:1"]}, "task": {"type": "worker", "index": 0},
                                    "rpc_layer": "grpc"})
        assert resolver.master() == ""
        set_tf_config(monkeypatch, {"cluster": CHIEF_2W, "session_master": "sm"})
        assert resolver.master() == "sm"

    def test_master_errors(self, monkeypatch):
        resolver = TFConfigClusterResolver()
        set_tf_config(monkeypatch, {"cluster": CHIEF_2W, "task": {"type": "worker", "index": 3}})
        with pytest.raises(ValueError, match=verbatim("No task with index 3 in job 'worker'")):
            resolver.master()
        set_tf_config(monkeypatch, {"cluster": CHIEF_2W})
        with pytest.raises(ValueError, match=verbatim("No such job in cluster: None")):
            resolver.master()
        set_tf_config(monkeypatch, {"cluster": {"worker": {"3": "w3:1"}}})  # sparse: job_tasks has 4 entries
        with pytest.raises(ValueError, match=verbatim("No such job in cluster: None")):
            resolver.master()

    def test_bad_json_surfaces_from_every_read(self, monkeypatch):
        set_tf_config(monkeypatch, "")
        resolver = TFConfigClusterResolver()
        for read in (resolver.cluster_spec, lambda: resolver.task_type, lambda: resolver.task_id, resolver.master):
            with pytest.raises(json.JSONDecodeError, match="^Expecting value: line 1 column 1 \\(char 0\\)\n"):
                read()
        assert resolver.environment is None

    def test_bad_cluster_in_tf_config(self, monkeypatch):
        set_tf_config(monkeypatch, {"cluster": {"worker": "w0:1"}, "task": {"type": "worker", "index": 0}})
        with pytest.raises(TypeError, match=verbatim(
                "The tasks for job 'worker' must be a list or a dictionary from integers to strings.")):
            TFConfigClusterResolver().cluster_spec()


class TestSimpleClusterResolver:
    def test_type_checks(self):
        with pytest.raises(TypeError, match=verbatim("cluster_spec must be a `tf.train.ClusterSpec`.")):
            SimpleClusterResolver(TWO_WORKERS)
        for master in (None, b"m"):
            with pytest.raises(TypeError, match=verbatim("master must be a string.")):
                SimpleClusterResolver(ClusterSpec(TWO_WORKERS), master=master)

    def test_defaults(self):
        resolver = SimpleClusterResolver(ClusterSpec({}))
        assert (resolver.master(), resolver.task_type, resolver.task_id, resolver.environment,
                resolver.rpc_layer, resolver.num_accelerators()) == ("", None, None, "", None, {})

    def test_values_and_master(self):
        spec = ClusterSpec(TWO_WORKERS)
        gpus = {"GPU": 2}
        resolver = SimpleClusterResolver(spec, master="m", task_type="worker", task_id=1, environment="google",
                                         num_accelerators=gpus, rpc_layer="grpc")
        assert resolver.cluster_spec() is spec
        assert resolver.num_accelerators() is gpus
        assert (resolver.task_type, resolver.task_id, resolver.environment) == ("worker", 1, "google")
        assert resolver.master() == "grpc://m"
        assert resolver.master("worker", 0) == "grpc://w0:1"
        assert resolver.master("worker") == "grpc://m"
        assert resolver.master(rpc_layer="x") == "x://m"
        with pytest.raises(ValueError, match=verbatim("No task with index 5 in job 'worker'")):
            resolver.master("worker", 5)

    def test_setters(self):
        resolver = SimpleClusterResolver(ClusterSpec(TWO_WORKERS))
        resolver.task_type, resolver.task_id, resolver.rpc_layer = "worker", 0, "grpc"
        assert (resolver.task_type, resolver.task_id, resolver.master("worker", 0)) == ("worker", 0, "grpc://w0:1")

    def test_base_class_is_abstract(self):
        with pytest.raises(TypeError, match="abstract"):
            ClusterResolver()


# -------------------------------------------------------------------------------------------------- roles


VALIDATION_ERRORS = [
    ({"master": ["m:1"]}, "worker", 0,
     "Disallowed task type found in cluster spec. Allowed types are ('chief', 'worker', 'evaluator', 'ps', None) "
     "and the cluster spec is ClusterSpec({'master': ['m:1']})."),
    ({"worker": {1: "a"}, "master": ["m:1"]}, "Worker", 0,  # job names are checked before the task type
     "Disallowed task type found in cluster spec. Allowed types are ('chief', 'worker', 'evaluator', 'ps', None) "
     "and the cluster spec is ClusterSpec({'master': ['m:1'], 'worker': {1: 'a'}})."),
    (TWO_WORKERS, "Worker", 0,
     "Unrecognized task_type: Worker, valid task types are: ('chief', 'worker', 'evaluator', 'ps', None)"),
    (TWO_WORKERS, "chief", 0, "`task_type` 'chief' not found in cluster_spec."),
    ({}, "worker", 0, "`task_type` 'worker' not found in cluster_spec."),
    ({"chief": ["a", "b"]}, "worker", 0, "`task_type` 'worker' not found in cluster_spec."),
    ({"chief": ["a", "b"]}, "chief", 5, "There must be at most one 'chief' job."),
    ({"worker": ["a"], "evaluator": ["e0", "e1"]}, "worker", 0, "There must be at most one 'evaluator' job."),
    (TWO_WORKERS, "worker", 2, "The `task_id` 2 exceeds the maximum id of worker."),
    ({"ps": ["p"], "worker": ["a"]}, "ps", 1, "The `task_id` 1 exceeds the maximum id of ps."),
    ({"worker": []}, "worker", 0, "The `task_id` 0 exceeds the maximum id of worker."),
    ({"worker": {5: "a"}}, "worker", 1, "The `task_id` 1 exceeds the maximum id of worker."),  # compares counts
    ({"chief": [], "worker": ["a"]}, "worker", 0,  # TF: no task is chief and the leader does not exist
     "The 'chief' job in the cluster spec ClusterSpec({'chief': {}, 'worker': ['a']}) has no tasks. List its task "
     "addresses or remove the job."),
    (TWO_WORKERS, "worker", None, MISSING_TASK),
    (TWO_WORKERS, "worker", -1,
     "The `task_id` -1 is negative; task ids count from 0 within each job. Set task.index in TF_CONFIG, or the "
     "resolver's task_id, to an integer in [0, 2) for job 'worker'."),
    (TWO_WORKERS, "evaluator", -2,
     "The `task_id` -2 is negative; task ids count from 0 within each job. Set task.index in TF_CONFIG, or the "
     "resolver's task_id, to a non-negative integer."),
]


class TestValidation:
    @pytest.mark.parametrize("cluster, task_type, task_id, text", VALIDATION_ERRORS)
    def test_errors(self, cluster, task_type, task_id, text):
        for function in (validate_cluster_spec, is_chief, id_in_cluster, collective_leader):
            if function is collective_leader and not cluster:
                continue  # an empty cluster is local: no leader and no validation
            with pytest.raises(ValueError, match=verbatim(text)):
                function(cluster, task_type, task_id)

    def test_non_integer_task_id(self):
        with pytest.raises(TypeError, match=verbatim(
                "`task_id` must be an integer, got '0' of type str. Set task.index in TF_CONFIG, or the "
                "resolver's task_id, to an integer in [0, 2) for job 'worker'.")):
            validate_cluster_spec(TWO_WORKERS, "worker", "0")

    @pytest.mark.parametrize("cluster, task_type, task_id", [
        (CHIEF_2W, None, None), ({}, None, None), (CHIEF_2W, "evaluator", 7), (CHIEF_2W, "worker", 1),
        (ClusterSpec(CHIEF_2W), "chief", 0), ({"ps": ["p"], "worker": ["a"]}, "ps", 0),
    ])
    def test_valid(self, cluster, task_type, task_id):
        validate_cluster_spec(cluster, task_type, task_id)

    def test_normalize(self):
        spec = ClusterSpec(TWO_WORKERS)
        assert normalize_cluster_spec(spec) is spec
        assert normalize_cluster_spec(TWO_WORKERS) == spec
        for bad in (None, [], "worker"):
            with pytest.raises(ValueError, match=verbatim(
                    "`cluster_spec' should be dict or a `tf.train.ClusterSpec` or a `tf.train.ClusterDef` object")):
                normalize_cluster_spec(bad)

    def test_allowed_task_types(self):
        assert ALLOWED_TASK_TYPES == ("chief", "worker", "evaluator", "ps", None)


WITH_EVALUATOR = {"worker": ["a"], "evaluator": ["e"]}
WITH_PS = {"ps": ["p"], "worker": ["a"]}


class TestRoles:
    @pytest.mark.parametrize("cluster, task_type, task_id, chief, count, index, leader", [
        (CHIEF_2W, "chief", 0, True, 3, 0, "/job:chief/replica:0/task:0"),
        (CHIEF_2W, "worker", 0, False, 3, 1, "/job:chief/replica:0/task:0"),
        (CHIEF_2W, "worker", 1, False, 3, 2, "/job:chief/replica:0/task:0"),
        (TWO_WORKERS, "worker", 0, True, 2, 0, "/job:worker/replica:0/task:0"),
        (TWO_WORKERS, "worker", 1, False, 2, 1, "/job:worker/replica:0/task:0"),
        (WITH_EVALUATOR, "worker", 0, True, 1, 0, "/job:worker/replica:0/task:0"),
        (WITH_EVALUATOR, "evaluator", 0, True, 1, 0, ""),
        (WITH_PS, "worker", 0, True, 1, 0, "/job:worker/replica:0/task:0"),
        ({"chief": ["c"], "worker": {3: "w"}}, "worker", 0, False, 2, 1, "/job:chief/replica:0/task:0"),
    ])
    def test_table(self, cluster, task_type, task_id, chief, count, index, leader):
        assert is_chief(cluster, task_type, task_id) is chief
        assert worker_count(cluster, task_type) == count
        assert id_in_cluster(cluster, task_type, task_id) == index
        assert collective_leader(cluster, task_type, task_id) == leader

    def test_no_task(self):
        assert is_chief(CHIEF_2W, None, None) is False
        with pytest.raises(ValueError, match=verbatim("Unexpected `task_type` None")):
            worker_count(CHIEF_2W, None)
        with pytest.raises(ValueError, match=verbatim("There is no id for task_type None")):
            id_in_cluster(CHIEF_2W, None, None)

    def test_ps(self):
        assert is_chief(WITH_PS, "ps", 0) is False
        assert collective_leader(WITH_PS, "ps", 0) == "/job:worker/replica:0/task:0"
        with pytest.raises(ValueError, match=verbatim("Unexpected `task_type` 'ps'")):
            worker_count(WITH_PS, "ps")
        with pytest.raises(ValueError, match=verbatim("There is no id for task_type 'ps'")):
            id_in_cluster(WITH_PS, "ps", 0)

    def test_evaluator_outside_the_cluster(self):
        assert is_chief(CHIEF_2W, "evaluator", 0) is True
        assert id_in_cluster(CHIEF_2W, "evaluator", 5) == 5
        assert collective_leader(CHIEF_2W, "evaluator", 0) == ""
        with pytest.raises(ValueError, match=verbatim(  # TF: KeyError: 'evaluator'
                "The 'evaluator' job is missing from the cluster spec ClusterSpec({'chief': ['c0:1'], 'worker': "
                "['w0:1', 'w1:1']}), so the evaluator's worker count is unknown. Add the evaluator's own job to "
                'the cluster, e.g. "evaluator": ["host:port"].')):
            worker_count(CHIEF_2W, "evaluator")

    def test_local_cluster_has_no_leaders(self):
        assert collective_leader({}, "worker", 0) == ""
        assert coordination_leader({}) == coordination_leader(ClusterSpec(None)) == ""

    @pytest.mark.parametrize("cluster, leader", [
        (CHIEF_2W, "/job:chief/replica:0/task:0"), (TWO_WORKERS, "/job:worker/replica:0/task:0"),
        (WITH_PS, "/job:ps/replica:0/task:0"), ({"ps": ["p"]}, "/job:ps/replica:0/task:0"),
    ])
    def test_coordination_leader(self, cluster, leader):
        assert coordination_leader(cluster) == leader

    def test_leaderless_clusters_raise_value_error(self):  # TF: bare AssertionError
        with pytest.raises(ValueError, match=verbatim(
                "The cluster spec ClusterSpec({'evaluator': ['e']}) has no 'ps' or 'chief' or 'worker' job to "
                "lead the coordination service. Add a 'worker' job (and optionally one 'chief') to the cluster.")):
            coordination_leader({"evaluator": ["e"]})
        with pytest.raises(ValueError, match=verbatim(
                "The cluster spec ClusterSpec({'ps': ['p']}) has no 'chief' or 'worker' job to lead collective "
                "ops. Add a 'worker' job (and optionally one 'chief') to the cluster.")):
            collective_leader({"ps": ["p"]}, "ps", 0)

    @settings(deadline=None)
    @given(st.integers(0, 1), st.integers(0, 9), st.integers(0, 3), st.integers(0, 1))
    def test_id_in_cluster_is_a_bijection_onto_worker_range(self, chiefs, workers, ps, evaluators):
        sizes = {"chief": chiefs, "worker": workers, "ps": ps, "evaluator": evaluators}
        cluster = {job: [f"{job}{i}:1" for i in range(n)] for job, n in sizes.items() if n}
        tasks = [("chief", i) for i in range(chiefs)] + [("worker", i) for i in range(workers)]
        if not tasks:
            return
        count = worker_count(cluster, tasks[0][0])
        assert count == chiefs + workers
        assert sorted(id_in_cluster(cluster, *task) for task in tasks) == list(range(count))
        assert [task for task in tasks if is_chief(cluster, *task)] == [tasks[0]]
        assert {collective_leader(cluster, *task) for task in tasks} == {f"/job:{tasks[0][0]}/replica:0/task:0"}
        roles = [worker_role(cluster, *task) for task in tasks]
        assert [role.id_in_cluster for role in roles] == list(range(count))
        assert all(role.num_workers == count for role in roles)


MWMS_STARTUP_ERRORS = [  # TF_CONFIG, and the error TF 2.21 raises creating MultiWorkerMirroredStrategy
    ({"cluster": {"worker": ["h:1"]}}, ValueError, MISSING_TASK),
    ({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker"}}, ValueError, MISSING_TASK),
    ({"cluster": {"worker": ["h:1"]}, "task": {"index": 0}}, ValueError, MISSING_TASK),
    ({"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": "2"}}, ValueError,
     "The `task_id` 2 exceeds the maximum id of worker."),
    ({"cluster": {"master": ["h:1"]}, "task": {"type": "master", "index": 0}}, ValueError,
     "Disallowed task type found in cluster spec. Allowed types are ('chief', 'worker', 'evaluator', 'ps', "
     "None) and the cluster spec is ClusterSpec({'master': ['h:1']})."),
    ({"cluster": {"worker": ["h:1"]}, "task": {"type": "Worker", "index": 0}}, ValueError,
     "Unrecognized task_type: Worker, valid task types are: ('chief', 'worker', 'evaluator', 'ps', None)"),
    ({"cluster": {"worker": ["h:1"]}, "task": {"type": "chief", "index": 0}}, ValueError,
     "`task_type` 'chief' not found in cluster_spec."),
    ({"cluster": {"chief": ["h:1", "h:2"]}, "task": {"type": "chief", "index": 0}}, ValueError,
     "There must be at most one 'chief' job."),
    ({"cluster": {"ps": ["h:1"], "worker": ["h:2"]}, "task": {"type": "ps", "index": 0}}, ValueError,
     "There is no id for task_type 'ps'"),
    ({"cluster": {"worker": "h:1"}, "task": {"type": "worker", "index": 0}}, TypeError,
     "The tasks for job 'worker' must be a list or a dictionary from integers to strings."),
]


class TestWorkerRole:
    def test_local_mode(self):
        assert worker_role({}, "worker", 3) == WorkerRole(None, None, 0, 1, True, "")

    def test_input_context_ids_of_two_workers(self):  # spec section 5: (2, 0|1, ...)
        roles = [worker_role(TWO_WORKERS, "worker", i) for i in range(2)]
        assert [(role.num_workers, role.id_in_cluster) for role in roles] == [(2, 0), (2, 1)]
        assert [role.is_chief for role in roles] == [True, False]

    @pytest.mark.parametrize("config, error, text", MWMS_STARTUP_ERRORS)
    def test_mwms_startup_errors_from_tf_config(self, monkeypatch, config, error, text):
        set_tf_config(monkeypatch, config)
        resolver = TFConfigClusterResolver()
        with pytest.raises(error, match=verbatim(text)):
            worker_role(resolver.cluster_spec(), resolver.task_type, resolver.task_id)

    def test_evaluator_role(self):
        assert worker_role(WITH_EVALUATOR, "evaluator", 0) == WorkerRole("evaluator", 0, 0, 1, True, "")
        with pytest.raises(ValueError, match="The 'evaluator' job is missing"):
            worker_role(TWO_WORKERS, "evaluator", 0)


# ------------------------------------------------------------------------------- TensorFlow as the oracle


CONFORMANCE_CLUSTERS = [
    {}, CHIEF_2W, TWO_WORKERS, WITH_EVALUATOR, WITH_PS, {"ps": ["p"]}, {"evaluator": ["e"]},
    {"chief": ["c"], "worker": {3: "w3", 1: "w1"}}, {"worker": {"2": "w2"}}, {"worker": ("a", "b"), "chief": ["c"]},
    {"master": ["m"]}, {"chief": ["a", "b"]}, {"worker": ["a"], "evaluator": ["e0", "e1"]}, {"worker": {5: "a"}},
    {"chief": [], "worker": ["a"]}, {"worker": []},
]
CONFORMANCE_TASKS = [(None, None), ("worker", None), ("evaluator", None), ("chief", 0), ("worker", 0), ("worker", 1),
                     ("worker", 3), ("evaluator", 0), ("evaluator", 4), ("ps", 0), ("ps", 1), ("Worker", 0),
                     ("master", 0)]
CONFORMANCE_TF_CONFIGS = [
    None, "", "{bad", "{'cluster': {}}",
    {"cluster": TWO_WORKERS, "task": {"type": "worker", "index": "1"}, "rpc_layer": "grpc", "environment": "cloud"},
    {"cluster": CHIEF_2W, "task": {"type": "chief", "index": 0}},
    {"cluster": {"worker": ["a"]}, "task": {"type": "worker", "index": 0}, "rpc_layer": "grpc"},
    {"cluster": CHIEF_2W, "session_master": "sm"}, {"cluster": CHIEF_2W}, {"task": {"type": 5, "index": 2.5}},
    {"cluster": {"worker": {"3": "w3"}}}, {"cluster": {"worker": "h:1"}},
]


def outcome(function, *args):
    """The value of ``function(*args)``, or its exception's type name and TF's part of the message."""
    try:
        return function(*args)
    except Exception as error:  # noqa: BLE001 - the outcome is what is compared
        return type(error).__name__, str(error).split("\n")[0]


def is_mirrorlab_divergence(theirs, ours) -> bool:
    """True where mirrorlab deliberately replaces TF's result with a clear error (see roles.py docstrings)."""
    tf_is_obscure = theirs in (("AssertionError", ""), ("KeyError", "'evaluator'")) or (
        isinstance(theirs, tuple) and "not supported between instances" in theirs[1])
    return tf_is_obscure or ours == ("ValueError", MISSING_TASK) or (
        isinstance(ours, tuple) and ours[1].endswith("has no tasks. List its task addresses or remove the job."))


@pytest.mark.tensorflow
class TestTensorFlowConformance:
    """Runs the same inputs through TensorFlow 2.21 and mirrorlab and compares results and messages."""

    @pytest.fixture
    def tf(self, monkeypatch):
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
        return pytest.importorskip("tensorflow")

    def test_cluster_spec(self, tf):
        for cluster in CONFORMANCE_CLUSTERS + [{"worker": "h:1"}, {1: ["a"]}, {"worker": [1]}, [("w", ["a"])]]:
            theirs, ours = outcome(tf.train.ClusterSpec, cluster), outcome(ClusterSpec, cluster)
            assert isinstance(theirs, tuple) == isinstance(ours, tuple), cluster
            if isinstance(theirs, tuple):
                assert ours == theirs, cluster
                continue
            assert (ours.as_dict(), ours.jobs, repr(ours), bool(ours)) == (
                theirs.as_dict(), theirs.jobs, repr(theirs), bool(theirs)), cluster
            assert ClusterSpec(ours).jobs == tf.train.ClusterSpec(theirs).jobs
            for job in ours.jobs + ["nope"]:
                for method in ("num_tasks", "task_indices", "job_tasks"):
                    mine, tfs = outcome(getattr(ours, method), job), outcome(getattr(theirs, method), job)
                    assert mine == tfs
                for index in (0, 1, 3, "0"):
                    assert outcome(ours.task_address, job, index) == outcome(theirs.task_address, job, index)
            by_index = {job: dict(enumerate(ours.job_tasks(job))) for job in ours.jobs if ours.num_tasks(job)}
            for other in (cluster, ours.as_dict(), by_index):
                assert (ours == other) == (theirs == other), (cluster, other)

    def test_roles(self, tf):
        from tensorflow.python.distribute import multi_worker_util as tf_roles

        ours_by_name = {"is_chief": is_chief, "id_in_cluster": id_in_cluster, "collective_leader": collective_leader,
                        "validate": validate_cluster_spec}
        theirs_by_name = {"is_chief": tf_roles.is_chief, "id_in_cluster": tf_roles.id_in_cluster,
                          "collective_leader": tf_roles.collective_leader,
                          "validate": tf_roles._validate_cluster_spec}
        compared = 0
        for cluster in CONFORMANCE_CLUSTERS:
            calls = [(coordination_leader, tf_roles.coordination_leader, (cluster,))]
            for task_type, task_id in CONFORMANCE_TASKS:
                calls.append((worker_count, tf_roles.worker_count, (cluster, task_type)))
                calls += [(ours, theirs_by_name[name], (cluster, task_type, task_id))
                          for name, ours in ours_by_name.items()]
            for ours, theirs, args in calls:
                ours, theirs = outcome(ours, *args), outcome(theirs, *args)
                assert ours == theirs or is_mirrorlab_divergence(theirs, ours), (args, ours, theirs)
                compared += ours == theirs
        assert compared > 500

    def test_mwms_startup_errors(self, tf):
        for config, error, text in MWMS_STARTUP_ERRORS:
            cluster = outcome(tf.train.ClusterSpec, config["cluster"])
            if isinstance(cluster, tuple):
                assert cluster == (error.__name__, text)
                continue
            task = config.get("task", {})
            resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
                cluster, task_type=task.get("type"), task_id=int(task["index"]) if "index" in task else None)
            assert outcome(tf.distribute.MultiWorkerMirroredStrategy, resolver) == (error.__name__, text), config

    def test_resolvers(self, tf, monkeypatch):
        tf_resolvers = tf.distribute.cluster_resolver

        def snapshot(resolver):
            return [outcome(lambda: resolver.cluster_spec().as_dict()), outcome(lambda: resolver.task_type),
                    outcome(lambda: resolver.task_id), outcome(lambda: resolver.rpc_layer), resolver.environment,
                    outcome(resolver.master), outcome(resolver.master, "worker", 0, "x")]

        for config in CONFORMANCE_TF_CONFIGS:
            set_tf_config(monkeypatch, config)
            assert snapshot(TFConfigClusterResolver()) == snapshot(tf_resolvers.TFConfigClusterResolver()), config
            assert snapshot(TFConfigClusterResolver("worker", "0", "grpc", "google")) == snapshot(
                tf_resolvers.TFConfigClusterResolver("worker", "0", "grpc", "google")), config
        ours = SimpleClusterResolver(ClusterSpec(TWO_WORKERS), "m", "worker", 1, rpc_layer="grpc")
        theirs = tf_resolvers.SimpleClusterResolver(tf.train.ClusterSpec(TWO_WORKERS), "m", "worker", 1,
                                                    rpc_layer="grpc")
        assert snapshot(ours) == snapshot(theirs)
        for args in [(TWO_WORKERS,), (ClusterSpec(TWO_WORKERS), None)]:
            tf_args = tuple(tf.train.ClusterSpec(a.as_dict()) if isinstance(a, ClusterSpec) else a for a in args)
            assert outcome(SimpleClusterResolver, *args) == outcome(tf_resolvers.SimpleClusterResolver, *tf_args)
