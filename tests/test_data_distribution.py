"""Distributing datasets across simulated workers and replicas, checked against TF 2.21's observed splits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab import errors
from mirrorlab.sim import SimCluster
from mirrorlab.tf.data.sharding import DeclaredShapeError, DeclaredShapesDataset


def policy(dataset: md.Dataset, name: str) -> md.Dataset:
    options = md.Options()
    options.experimental_distribute.auto_shard_policy = md.AutoShardPolicy[name]
    return dataset.with_options(options)


def steps_of(make_dataset, workers: int, devices: int = 1, seed: int = 0, **cluster):
    """Per worker: a list of steps, each a list of per-replica value lists."""
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        out = []
        for batch in strategy.experimental_distribute_dataset(make_dataset()):
            out.append([np.asarray(v).tolist() for v in strategy.experimental_local_results(batch)])
        return out
    return SimCluster(workers=workers, devices_per_worker=devices, seed=seed, **cluster).run(program)


@pytest.mark.parametrize("n, expected0, expected1", [
    (16, [[0, 1, 2, 3], [8, 9, 10, 11]], [[4, 5, 6, 7], [12, 13, 14, 15]]),
    (14, [[0, 1, 2, 3], [8, 9, 10]], [[4, 5, 6, 7], [11, 12, 13]]),   # last batch 6 -> 3 + 3, not 4 + 2
    (13, [[0, 1, 2, 3], [8, 9, 10]], [[4, 5, 6, 7], [11, 12]]),
    (9, [[0, 1, 2, 3], [8]], [[4, 5, 6, 7], []]),
])
def test_auto_policy_two_workers_matches_tf(n, expected0, expected1):
    result = steps_of(lambda: md.Dataset.range(n).batch(8), workers=2).values()
    assert [s[0] for s in result[0]] == expected0
    assert [s[0] for s in result[1]] == expected1


def test_auto_policy_three_workers_matches_tf():
    full = steps_of(lambda: md.Dataset.range(13).batch(8), workers=3).values()
    assert [[s[0] for s in w] for w in full] == [[[0, 1, 2], [8, 9]], [[3, 4, 5], [10, 11]], [[6, 7], [12]]]
    two = steps_of(lambda: md.Dataset.range(10).batch(8), workers=3).values()
    assert [w[1][0] for w in two] == [[8], [9], []]
    one = steps_of(lambda: md.Dataset.range(1).batch(8), workers=3).values()
    assert [w[0][0] for w in one] == [[0], [], []]


def test_off_policy_gives_every_worker_everything():
    result = steps_of(lambda: policy(md.Dataset.range(13).batch(8), "OFF"), workers=2).values()
    assert result[0] == result[1] == [[[0, 1, 2, 3]], [[4, 5, 6, 7]], [[8, 9, 10, 11]], [[12]]]
    odd = steps_of(lambda: policy(md.Dataset.range(14).batch(7), "OFF"), workers=2).values()
    assert [s[0] for s in odd[0]] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10], [11, 12, 13]]
    assert [s[0] for s in odd[1]] == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9], [10, 11, 12, 13]]


@pytest.fixture
def record_files(tmp_path: Path) -> list[str]:
    names = []
    for i in range(3):
        path = tmp_path / f"part-{i}.txt"
        path.write_text("".join(f"{10 * i + j}\n" for j in range(4)))
        names.append(str(path))
    return names


def _lines(files, name):
    return lambda: policy(md.TextLineDataset(files).map(lambda line: line.astype(np.int64)).batch(4), name)


def test_file_policy_shards_files_and_pads_the_shorter_worker_with_empty_batches(record_files):
    result = steps_of(_lines(record_files, "FILE"), workers=2).values()
    assert [s[0] for s in result[0]] == [[0, 1], [2, 3], [20, 21], [22, 23]]
    assert [s[0] for s in result[1]] == [[10, 11], [12, 13], [], []]
    assert steps_of(_lines(record_files, "AUTO"), workers=2).values() == result


def test_data_policy_with_files_reads_every_file_on_every_worker(record_files):
    result = steps_of(_lines(record_files, "DATA"), workers=2).values()
    assert [s[0] for s in result[0]] == [[0, 1], [10, 11], [20, 21]]
    assert [s[0] for s in result[1]] == [[2, 3], [12, 13], [22, 23]]


@pytest.mark.parametrize("name", ["FILE", "AUTO"])
def test_too_few_files_raises_tf_error_on_worker0_and_tells_the_others(record_files, name):
    result = steps_of(_lines(record_files[:1], name), workers=2)
    first = result[0]
    assert isinstance(first, errors.InvalidArgumentError)
    assert str(first).startswith("Could not apply FILE based sharding: the dataset only has 1 file(s), which is "
                                 "not enough for the required 2 shards/workers.")
    other = result[1]  # TF's class for a peer's aborted collective, with the cause TF's text leaves out
    assert isinstance(other, errors.UnavailableError) and not isinstance(other, errors.InvalidArgumentError)
    assert "Could not apply FILE based sharding" in str(other) and "worker 0" in str(other)


def _fails_on_second_batch(x):
    if int(np.asarray(x)[0]) >= 4:
        raise errors.InvalidArgumentError("bad batch")
    return x


@pytest.mark.parametrize("make", [lambda: ml.MirroredStrategy(["/cpu:0", "/cpu:1"]),
                                  lambda: ml.MultiWorkerMirroredStrategy()], ids=["mirrored", "mwms_one_worker"])
def test_a_pipeline_error_on_one_worker_leaves_its_strategy_usable(make):
    """TF 2.21: the iterator raises the pipeline's error; later collectives (an ON_READ read, reduce) work."""
    strategy = make()
    iterator = iter(strategy.experimental_distribute_dataset(md.Dataset.range(10).batch(4).map(_fails_on_second_batch)))
    next(iterator)
    with pytest.raises(errors.InvalidArgumentError, match="^bad batch$"):
        next(iterator)
    with strategy.scope():
        v = ml.Variable(1.0, synchronization=ml.VariableSynchronization.ON_READ,
                        aggregation=ml.VariableAggregation.SUM)
    assert v.numpy() == strategy.num_replicas_in_sync
    assert strategy.reduce("SUM", strategy.run(lambda: ml.constant(1.0)), axis=None) == strategy.num_replicas_in_sync


def test_a_pipeline_error_on_one_of_several_workers_tells_the_others():
    """On a cluster the failing worker's peers wait in the step's collective: they get its error, naming it, as
    TF's UnavailableError (an aborted collective)."""
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        chief = strategy.cluster_resolver.task_id == 0
        ds = policy(md.Dataset.range(16).batch(4).map(lambda x: _fails_on_second_batch(x) if chief else x), "OFF")
        return [b for b in strategy.experimental_distribute_dataset(ds)]

    result = SimCluster(workers=2).run(program)
    assert isinstance(result[0], errors.InvalidArgumentError) and str(result[0]) == "bad batch"
    assert isinstance(result[1], errors.UnavailableError) and "input pipeline of worker 0" in str(result[1])


def test_explicit_file_policy_on_a_range_fails_when_distributing():
    result = steps_of(lambda: policy(md.Dataset.range(8).batch(4), "FILE"), workers=2)
    assert all(isinstance(r, errors.NotFoundError) for r in result)
    assert "Found an unshardable source dataset: RangeDataset(0, 8, 1)" in str(result[0])


def test_auto_on_range_warns_and_falls_back_to_data(caplog):
    with caplog.at_level("WARNING", logger="mirrorlab"):
        steps_of(lambda: md.Dataset.range(4).batch(2), workers=2).values()
    assert "AUTO sharding policy will apply DATA sharding policy as it failed to apply FILE sharding policy" in caplog.text


def test_auto_fallback_is_silent_on_one_worker(caplog):
    """TF 2.21 logs nothing for MirroredStrategy or a one-worker MWMS: there is no other worker to shard for."""
    with caplog.at_level("WARNING", logger="mirrorlab"):
        strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
        assert len(list(strategy.experimental_distribute_dataset(md.Dataset.range(4).batch(2)))) == 2
        steps_of(lambda: md.Dataset.range(4).batch(2), workers=1).values()
    assert "AUTO sharding policy" not in caplog.text


def test_single_worker_two_replicas_uses_both_split_rules():
    def program(name):
        strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
        ds = policy(md.Dataset.range(13).batch(8), name)
        return [[np.asarray(v).tolist() for v in strategy.experimental_local_results(b)]
                for b in strategy.experimental_distribute_dataset(ds)]
    assert program("AUTO")[-1] == [[8, 9, 10], [11, 12]]      # legacy ceil split
    assert program("DATA")[-1] == [[8, 9, 10], [11, 12]]
    assert program("OFF")[-1] == [[8, 9, 10, 11], [12]]        # V2 fixed-size split
    assert program("FILE")[-1] == [[8, 9, 10, 11], [12]]


def test_unbatched_dataset_of_scalars_is_rejected_as_tf_does():
    """TF 2.21 raises IndexError('list index out of range') for scalar elements, whatever the policy;
    mirrorlab raises the same, with the fix on the following lines."""
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    for policy in ("AUTO", "DATA", "OFF", "FILE"):
        options = md.Options()
        options.experimental_distribute.auto_shard_policy = getattr(md.AutoShardPolicy, policy)
        with pytest.raises(IndexError) as info:
            strategy.experimental_distribute_dataset(md.Dataset.range(4).prefetch(1).with_options(options))
        first, *rest = str(info.value).splitlines()
        assert first == "list index out of range" and "call `.batch(global_batch_size)`" in rest[-1]


def test_next_inside_replica_function_is_rejected():
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    iterator = iter(strategy.experimental_distribute_dataset(md.Dataset.range(8).batch(4)))
    with pytest.raises(ValueError, match=r"next\(iterator\) should be called from outside of replica_fn"):
        strategy.run(lambda: next(iterator))


def test_distribute_datasets_from_function_gets_the_input_context():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()

        def dataset_fn(ctx: ml.InputContext):
            per_replica = ctx.get_per_replica_batch_size(8)
            return md.Dataset.range(16).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(per_replica)

        ds = strategy.distribute_datasets_from_function(dataset_fn)
        return [[np.asarray(v).tolist() for v in strategy.experimental_local_results(b)] for b in ds]

    result = SimCluster(workers=2, devices_per_worker=2).run(program).values()
    assert result[0] == [[[0, 2], [4, 6]], [[8, 10], [12, 14]]]
    assert result[1] == [[[1, 3], [5, 7]], [[9, 11], [13, 15]]]
    with pytest.raises(ValueError, match=r"The `global_batch_size` 8 is not divisible by `num_replicas_in_sync` 3 $"):
        ml.InputContext(1, 0, 3).get_per_replica_batch_size(8)


def _piece_order(workers: int, devices: int):
    """Replica (w, r) of a DATA-sharded pipeline receives piece w + r * W of each global batch."""
    return sorted(((w, r) for w in range(workers) for r in range(devices)), key=lambda wr: wr[0] + wr[1] * workers)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 50), batch=st.integers(1, 12), workers=st.integers(1, 4), devices=st.integers(1, 3),
       seed=st.integers(0, 100))
def test_every_example_is_seen_once_in_order_and_means_are_global(n, batch, workers, devices, seed):
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        steps, means = [], []
        for x in strategy.experimental_distribute_dataset(md.Dataset.range(n).batch(batch)):
            steps.append([np.asarray(v).tolist() for v in strategy.experimental_local_results(x)])
            values = strategy.run(lambda v: v.astype(np.float64) * 1.5, args=(x,))
            means.append(float(strategy.reduce("mean", values, axis=0)))
        return steps, means

    result = SimCluster(workers=workers, devices_per_worker=devices, seed=seed).run(program).values()
    counts = {len(steps) for steps, _ in result}
    assert counts == {-(-n // batch)}  # every worker runs the same number of steps
    seen, order = [], _piece_order(workers, devices)
    for step in range(counts.pop()):
        global_batch = [x for w, r in order for x in result[w][0][step][r]]
        seen += global_batch
        for _, means in result:
            assert means[step] == pytest.approx(np.mean(global_batch) * 1.5)
    assert seen == list(range(n))


def test_per_replica_input_gives_each_replica_its_own_pipeline_in_mirrored_strategy():
    """TF 2.21 (observed): dataset_fn runs once per replica with InputContext(2, k, 2); each replica reads its own
    dataset; a replica that ran out gets empty batches until every replica has."""
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    contexts = []

    def dataset_fn(ctx):
        contexts.append((ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync))
        k = ctx.input_pipeline_id
        return md.Dataset.range(k * 10, k * 10 + 2 + k).batch(1)

    options = ml.distribute.InputOptions(experimental_replication_mode=ml.distribute.InputReplicationMode.PER_REPLICA)
    steps = [[x.tolist() for x in strategy.experimental_local_results(batch)]
             for batch in strategy.distribute_datasets_from_function(dataset_fn, options)]
    assert contexts == [(2, 0, 2), (2, 1, 2)]
    assert steps == [[[0], [10]], [[1], [11]], [[], [12]]]
    with pytest.raises(NotImplementedError, match=r"only supported in `distribute_datasets_from_function`\.$"):
        strategy.experimental_distribute_dataset(md.Dataset.range(4).batch(2), options)


def test_distributed_dataset_cardinality_is_a_property_and_get_next_ends_with_out_of_range():
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    dist = strategy.experimental_distribute_dataset(md.Dataset.range(6).batch(4))
    assert dist.cardinality == 2 and isinstance(dist.cardinality, np.int64)
    assert strategy.experimental_distribute_dataset(md.Dataset.range(6).repeat().batch(4)).cardinality == -1
    iterator = iter(dist)
    iterator.get_next(), iterator.get_next()
    with pytest.raises(errors.OutOfRangeError, match="End of sequence"):
        iterator.get_next()


def test_distributed_element_spec_is_per_replica_with_static_batches_when_they_divide():
    two = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    spec = two.experimental_distribute_dataset(md.Dataset.range(8).batch(4, drop_remainder=True)).element_spec
    assert spec == ml.distribute.PerReplicaSpec(ml.TensorSpec((2,), np.int64), ml.TensorSpec((2,), np.int64))
    spec = two.experimental_distribute_dataset(md.Dataset.range(8).batch(4)).element_spec
    assert spec._value_specs[0].shape == (None,)
    one = ml.MirroredStrategy(["/cpu:0"])
    assert one.experimental_distribute_dataset(md.Dataset.range(8).batch(4, drop_remainder=True)).element_spec \
        == ml.TensorSpec((4,), np.int64)


def test_compute_batch_size_walks_the_ops_tf_walks():
    """TF 2.21's ``compute_batch_size`` (values recorded from TF): through filter, prefetch, assert_cardinality to a
    batch; zip and concatenate when every input has the same one; -1 past map, ignore_errors, window, scan, rebatch."""
    from mirrorlab.tf.data.batching import compute_batch_size

    D = md.Dataset

    def batched(size: int = 4) -> md.Dataset:
        return D.range(10).filter(lambda x: x >= 0).batch(size)

    found = {
        "zip": D.zip((batched(), (batched(), batched()))), "zip_other_sizes": D.zip((batched(), batched(3))),
        "concatenate": batched().concatenate(batched()), "concatenate_other": batched().concatenate(batched(3)),
        "assert_cardinality": batched().apply(md.experimental.assert_cardinality(3)), "prefetch": batched().prefetch(1),
        "unbatch_batch": batched().unbatch().batch(5), "ignore_errors": batched().ignore_errors(),
        "map": batched().map(lambda x: x), "window": batched().window(2).flat_map(lambda w: w),
        "scan": batched().scan(np.int64(0), lambda s, x: (s, x)), "rebatch": batched().rebatch(2),
    }
    assert {name: compute_batch_size(ds) for name, ds in found.items()} == {
        "zip": 4, "zip_other_sizes": -1, "concatenate": 4, "concatenate_other": -1, "assert_cardinality": 4,
        "prefetch": 4, "unbatch_batch": 5, "ignore_errors": -1, "map": -1, "window": -1, "scan": -1, "rebatch": -1}


def test_auto_sharding_gives_up_on_files_at_the_ops_tf_gives_up_at():
    """TF's FILE walk passes map, filter, shuffle, zip, concatenate, flat_map, ...; at scan, take_while, unique,
    group_by_window or ignore_errors it stops, and AUTO shards by DATA instead (TF 2.21's choices, setup A probes)."""
    from mirrorlab.tf.data.sharding import shard_by_file

    lines = md.TextLineDataset([str(Path(__file__))])
    for walked in (lines.map(lambda x: x), lines.shuffle(2, seed=1), lines.concatenate(lines), lines.window(2),
                   md.Dataset.zip((lines, lines)), lines.flat_map(md.Dataset.from_tensors)):
        shard_by_file(walked, 2, 0)
    for stop in (lines.scan(np.int64(0), lambda s, x: (s, x)), lines.take_while(lambda x: True), lines.unique(),
                 lines.group_by_window(lambda x: np.int64(0), lambda k, w: w, window_size=2), lines.ignore_errors()):
        with pytest.raises(errors.NotFoundError, match="Did not find a shardable source"):
            shard_by_file(stop, 2, 0)


def test_an_element_that_fails_raises_when_read_not_when_distributed(tmp_path):
    """TF decides sharding and batch size from the graph: a failing element raises at its step, even where mirrorlab
    looks at the data to decide (a window over text lines, whose second line fails)."""
    names = tmp_path / "a.txt"
    names.write_text("0\n1\n2\n3\n")
    lines = md.TextLineDataset([str(names)]).map(lambda s: np.asarray(s).astype(np.int64))
    failing = lines.map(lambda x: x + 0 * (1 // (x % 3 - 1))).window(4).flat_map(lambda w: w.batch(4))
    distributed = ml.MirroredStrategy(["/cpu:0", "/cpu:1"]).experimental_distribute_dataset(failing)
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        next(iter(distributed))


def test_declared_shapes_are_checked_on_every_element_not_only_the_first_of_a_shape():
    """The iterator's check of a rewritten rebatch's declared shape: elements that fit pass (each shape checked
    once), one that does not raises TF's error when it is reached, a later different misfit too."""
    shapes = [(2, 3), (2, 3), (1, 3), (2, 3), (4, 3)]
    source = ml.data.Dataset.from_generator(lambda: (np.zeros(s, np.float32) for s in shapes),
                                            output_signature=ml.TensorSpec((None, 3), ml.float32))
    it = iter(DeclaredShapesDataset(source, ml.TensorSpec((2, 3), ml.float32)))
    assert [next(it).shape for _ in range(2)] == [(2, 3), (2, 3)]
    with pytest.raises(DeclaredShapeError, match=r"component 0: expected \[2,3\] but got \[1,3\]"):
        next(it)
    again = iter(DeclaredShapesDataset(source.skip(3), ml.TensorSpec((2, 3), ml.float32)))
    assert next(again).shape == (2, 3)
    with pytest.raises(DeclaredShapeError, match=r"expected \[2,3\] but got \[4,3\]"):
        next(again)
