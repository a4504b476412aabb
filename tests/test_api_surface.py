"""Smaller public pieces: iterator helpers, model weights, restore status, the wire format, trace notes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab import errors
from mirrorlab.tf import keras
from mirrorlab.collective.message import AbortNotice, Fingerprint, Header
from mirrorlab.sim import SimCluster
from mirrorlab.trace import Trace
from mirrorlab.train import Checkpoint


def test_iterator_get_next_and_optional():
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    iterator = iter(strategy.experimental_distribute_dataset(md.Dataset.range(6).batch(4)))
    first = iterator.get_next()
    assert [v.tolist() for v in strategy.experimental_local_results(first)] == [[0, 1], [2, 3]]
    second = iterator.get_next_as_optional()
    assert second.has_value() and [v.tolist() for v in second.get_value().values] == [[4], [5]]
    end = iterator.get_next_as_optional()
    assert not end.has_value()
    with pytest.raises(errors.InvalidArgumentError, match="does not have a value"):
        end.get_value()


def test_model_weights_round_trip_and_summary():
    model = keras.Sequential([keras.layers.Dense(3, input_shape=(2,)), keras.layers.Dense(1)])
    weights = [np.full(w.shape, i, np.float32) for i, w in enumerate(model.get_weights())]
    model.set_weights(weights)
    assert [w.tolist() for w in model.get_weights()] == [w.tolist() for w in weights]
    lines = []
    model.summary(print_fn=lines.append)
    assert lines[-1] == "Total params: 13"


def test_restore_status_detects_a_checkpoint_sharing_nothing(tmp_path):
    path = Checkpoint(a=ml.Variable(1.0)).write(tmp_path / "ckpt")
    status = Checkpoint(b=ml.Variable(2.0)).read(path)
    with pytest.raises(AssertionError, match="Nothing except the root object matched"):
        status.assert_nontrivial_match()
    Checkpoint(a=ml.Variable(0.0)).read(path).assert_nontrivial_match()


def test_wire_headers_round_trip_through_json():
    fp = Fingerprint("all_reduce", "float32", (4, 2), "SUM")
    header = Header(7, fp, 3, 1, "train.py:12 in step")
    assert Header.from_json(header.to_json()) == header
    notice = AbortNotice.of(2, errors.InvalidArgumentError("bad shapes"))
    back = AbortNotice.from_json(notice.to_json()).to_error()
    assert isinstance(back, errors.InvalidArgumentError)
    assert back.message.startswith("Collective ops is aborted by: bad shapes")
    assert isinstance(AbortNotice(0, "NotAnError", "x").to_error(), errors.UnknownError)  # never arbitrary classes


def test_trace_notes_survive_serialization():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = ml.Variable(0.0)
        strategy.run(lambda: v.assign(float(ml.get_replica_context().replica_id_in_sync_group)))
        return True

    trace = SimCluster(workers=2, devices_per_worker=2, check_mirrors=False).run(program).trace  # TF's silence
    again = Trace.from_jsonl(trace.to_jsonl())
    assert [n.note for n in again.notes] == ["unsynced_update", "unsynced_update"]
    assert len(set(again.notes[0].details["digests"])) == 2  # the two local mirrors differ
    with pytest.raises(ValueError, match="not a mirrorlab trace"):
        Trace.from_jsonl('{"something": 1}\n')


def test_per_replica_input_mode_is_refused_as_tf_does():
    strategy = ml.MultiWorkerMirroredStrategy()
    options = ml.distribute.InputOptions(experimental_replication_mode=ml.distribute.InputReplicationMode.PER_REPLICA)
    with pytest.raises(NotImplementedError, match="InputReplicationMode.PER_REPLICA is only supported in "
                                                  "`distribute_datasets_from_function` of tf.distribute.MirroredStrategy"):
        strategy.experimental_distribute_dataset(md.Dataset.range(4).batch(2), options)


def test_function_decorator_runs_eagerly_with_or_without_arguments():
    """``@ml.function`` (TF's tf.function) runs the function eagerly, with or without arguments; Python numbers it
    returns come back as tensors, and an ``input_signature`` converts and checks the inputs, as TF's."""
    calls = []

    def step(x):
        calls.append(x)
        return x * 2

    assert ml.function(step)(1.5).dtype == np.float32 and calls == [1.5]  # ran now, its output a float32 tensor
    assert ml.function(jit_compile=True, reduce_retracing=True)(step).__name__ == "step"
    signed = ml.function(step, input_signature=[ml.TensorSpec([None], ml.float32)])
    assert signed(np.array([1.0, 2.0])).dtype == np.float32  # float64 data cast to the signature's dtype
    with pytest.raises(TypeError, match="Binding inputs to tf.function failed due to `Can not cast TensorSpec"):
        signed(np.ones((1, 2), np.float32))
    with pytest.raises(TypeError, match="expects a callable"):
        ml.function(3)


def test_function_input_signature_binds_nests_and_distributed_values_as_tf():
    """Nested specs and a distributed dataset's ``element_spec`` bind as TF 2.21's (texts recorded from it)."""
    spec = ml.TensorSpec([None], ml.float32)
    pair = ml.function(lambda x: x[0] + x[1], input_signature=[(spec, spec)])
    assert pair((np.ones(2, np.float32), [1, 2])).tolist() == [2.0, 3.0]
    with pytest.raises(TypeError, match=r"failed due to `Can not cast \[1.0\] to tuple type.`.* for signature: "
                                        r"\(x: Tuple\[TensorSpec\(shape=\(None,\), dtype=tf.float32, name=None\), "):
        pair([1.0])
    with pytest.raises(TypeError, match=r"failed due to `Expected \(1.0,\) to have length of 2`"):
        pair((1.0,))
    keyed = ml.function(lambda d: d["a"] * 2, input_signature=[{"b": spec, "a": spec}])
    with pytest.raises(TypeError, match=r"`\{'a': \[1.0\]\} has different keys with the TraceType "
                                        r"Dict\[\['b', TensorSpec"):
        keyed({"a": [1.0]})
    strategy = ml.MirroredStrategy(["CPU:0", "CPU:1"])
    dist = strategy.experimental_distribute_dataset(md.Dataset.range(8).batch(4))
    step = ml.function(lambda x: strategy.run(lambda v: 2 * v, args=(x,)), input_signature=[dist.element_spec])
    assert [v.tolist() for v in step(next(iter(dist))).values] == [[0, 2], [4, 6]]
    with pytest.raises(TypeError, match="`'numpy.ndarray' object has no attribute '_values'`"):
        step(np.array([1, 2]))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt"])
def test_variable_operators_convert_the_other_operand_to_the_variables_dtype_as_tf(op):
    import operator

    fn = getattr(operator, op)
    v = ml.Variable(np.array([2.0, 3.0], np.float32))
    iv = ml.Variable(np.array([2, 3], np.int32))
    other = np.array([1.5, 2.5])  # float64: TF casts it to the variable's dtype
    for result in (fn(v, other), fn(other, v), fn(v, np.float64(1.5)), fn(np.float64(1.5), v)):
        assert result.dtype == (np.bool_ if op == "lt" else np.float32)
    assert fn(iv, np.array([1.5, 2.5], np.float32)).dtype == (
        np.bool_ if op == "lt" else np.float64 if op == "truediv" else np.int32)
    expected = errors.InvalidArgumentError if op == "add" else TypeError
    with pytest.raises(expected, match="AddV2|Cannot convert 1.5 to EagerTensor of dtype int32|same dtype"):
        fn(iv, 1.5)
    with pytest.raises(TypeError, match="Cannot convert 1.5 to EagerTensor of dtype int32"):
        fn(1.5, iv)


def test_a_cross_device_ops_that_is_not_one_is_refused_when_the_strategy_is_made():
    """TF only fails at the first reduction ('int' object has no attribute 'batch_reduce'); mirrorlab says so at
    construction, with the same error."""
    with pytest.raises(AttributeError, match="'int' object has no attribute 'batch_reduce'\nFix: pass"):
        ml.MirroredStrategy(["/cpu:0"], cross_device_ops=5)
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"], cross_device_ops=ml.distribute.NcclAllReduce())
    per_replica = strategy.experimental_distribute_values_from_function(lambda c: np.float32(c.replica_id_in_sync_group))
    assert strategy.reduce("SUM", per_replica, axis=None) == 1.0  # NCCL's sum, on CPU devices too


def test_a_set_strategy_belongs_to_one_thread_and_each_simulated_worker():
    """experimental_set_strategy is per thread, as TF's; every simulated worker sets its own."""
    def program() -> list[bool]:
        strategy = ml.MultiWorkerMirroredStrategy()
        ml.distribute.experimental_set_strategy(strategy)
        try:
            seen = []
            thread = threading.Thread(target=lambda: seen.append(ml.has_strategy()))
            thread.start()
            thread.join()
            return [ml.get_strategy() is strategy, ml.in_cross_replica_context(), *seen]
        finally:
            ml.distribute.experimental_set_strategy(None)

    assert SimCluster(workers=2).run(program).values() == [[True, True, False]] * 2
    assert not ml.has_strategy()


def test_distributed_variables_are_distributed_values_as_in_tf():
    strategy = ml.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():
        mirrored = ml.Variable(1.0)
        on_read = ml.Variable(1.0, synchronization=ml.VariableSynchronization.ON_READ,
                              aggregation=ml.VariableAggregation.SUM)
    per_replica = strategy.run(lambda: ml.get_replica_context().replica_id_in_sync_group)
    for value in (mirrored, on_read, per_replica):
        assert isinstance(value, ml.DistributedValues) and isinstance(value, ml.distribute.DistributedValues)
    assert issubclass(ml.MirroredVariable, ml.DistributedValues) and issubclass(ml.PerReplica, ml.DistributedValues)
    plain, component = ml.Variable(1.0), mirrored.values[1]
    assert not isinstance(plain, ml.DistributedValues) and not isinstance(component, ml.DistributedValues)
    # A variable passed to run stays the variable (each replica reads its own copy), as TF's select_replica does.
    assert strategy.run(lambda v: v is mirrored, args=(mirrored,)) is True


def test_a_dropped_mirrored_strategy_ends_its_replica_threads():
    """Each multi-device strategy runs its replicas on threads of its own: once the strategy is dropped (after a
    successful run and after a failing one) they end, so a process creating many strategies does not pile up
    threads."""
    import gc
    import time

    def failing():
        raise ValueError("replica failure")

    def settled() -> int:
        """The thread count once dropped strategies (this test's or earlier tests') have ended their threads."""
        gc.collect()
        count, deadline = threading.active_count(), time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.05)
            count, previous = threading.active_count(), count
            if count == previous:
                break
        return count

    before = settled()
    for _ in range(5):
        strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
        assert strategy.experimental_local_results(strategy.run(
            lambda: ml.get_replica_context().replica_id_in_sync_group)) == (0, 1)
        with pytest.raises(ValueError, match="replica failure"):
            strategy.run(failing)
        del strategy
    assert settled() <= before  # 10 more threads if the strategies stayed alive


def test_the_experimental_multi_worker_strategy_takes_tfs_older_signature():
    """``tf.distribute.experimental.MultiWorkerMirroredStrategy(communication, cluster_resolver)``, as TF 2.21."""
    experimental = ml.distribute.experimental
    for communication, implementation in ((experimental.CollectiveCommunication.RING, "RING"), ("nccl", "NCCL"),
                                          (experimental.CollectiveCommunication.AUTO, "AUTO")):
        strategy = experimental.MultiWorkerMirroredStrategy(communication)
        assert isinstance(strategy, ml.MultiWorkerMirroredStrategy) and strategy.num_replicas_in_sync == 1
        assert strategy.extended._options.implementation.name == implementation
    with pytest.raises(TypeError, match="unexpected keyword argument 'communication_options'"):
        experimental.MultiWorkerMirroredStrategy(communication_options=ml.CommunicationOptions())


def test_collective_hints_are_communication_options_for_any_collective():
    """TF's deprecated ``CollectiveHints(bytes_per_pack, timeout_seconds)`` builds the same Options (AUTO), which
    collectives accept where they take CommunicationOptions; a negative pack size is refused as there."""
    hints = ml.distribute.experimental.CollectiveHints(bytes_per_pack=4, timeout_seconds=3.0)
    assert hints == ml.CommunicationOptions(bytes_per_pack=4, timeout_seconds=3.0)
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    summed = strategy.run(lambda: ml.get_replica_context().all_reduce("SUM", ml.constant(1.5), options=hints))
    assert [float(v) for v in strategy.experimental_local_results(summed)] == [3.0, 3.0]
    with pytest.raises(ValueError, match="bytes_per_pack` must be >=0"):
        ml.distribute.experimental.CollectiveHints(bytes_per_pack=-1)
