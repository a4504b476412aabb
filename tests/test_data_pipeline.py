"""The dataset API on its own (no distribution), checked against TensorFlow 2.21's tf.data.

Expected orders and messages marked "TF 2.21" were recorded with tensorflow-cpu 2.21.0.
"""

from __future__ import annotations

import builtins
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab import errors
from mirrorlab.tf.data import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from mirrorlab.sim import SimCluster
from mirrorlab.tf.dtypes import string as STRING


def items(dataset: Dataset) -> list:
    """Elements as plain Python values (arrays become lists, scalars Python numbers/bytes)."""
    return [np.asarray(e).tolist() for e in dataset]


# -- sources ----------------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(start=st.integers(-10, 10), stop=st.integers(-10, 20), step=st.integers(-4, 4).filter(bool))
def test_range_is_python_range_as_int64_scalars(start, stop, step):
    """Dataset.range(start, stop, step) yields Python's range as int64 scalars, with a known cardinality."""
    ds = Dataset.range(start, stop, step)
    elements = list(ds)
    assert [int(e) for e in elements] == list(range(start, stop, step))
    assert all(e.dtype == np.int64 and e.shape == () for e in elements)
    assert ds.cardinality() == len(range(start, stop, step))
    assert ds.element_spec == md.TensorSpec((), np.int64)


def test_from_tensor_slices_slices_every_component_of_a_nest():
    """from_tensor_slices slices each leaf of a dict/tuple nest along its first dimension, keeping dtypes."""
    ids = np.array([7, 8, 9], np.int32)
    features = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    weights = np.array([0.5, 1.5, 2.5], np.float64)
    ds = Dataset.from_tensor_slices({"id": ids, "x": (features, weights)})
    elements = list(ds)
    assert len(elements) == ds.cardinality() == 3
    for i, element in enumerate(elements):
        assert set(element) == {"id", "x"} and isinstance(element["x"], tuple)
        np.testing.assert_array_equal(element["id"], ids[i])
        np.testing.assert_array_equal(element["x"][0], features[i])
        np.testing.assert_array_equal(element["x"][1], weights[i])
        assert (element["id"].dtype, element["x"][0].dtype, element["x"][1].dtype) == (np.int32, np.float32,
                                                                                      np.float64)
    assert ds.element_spec == {"id": md.TensorSpec((), np.int32),
                               "x": (md.TensorSpec((2, 2), np.float32), md.TensorSpec((), np.float64))}


def test_from_tensor_slices_converts_python_lists_to_float32_and_int32_tensors():
    """As in TF, a Python list is one tensor: floats become float32, ints int32, nested lists rows."""
    floats = list(Dataset.from_tensor_slices([1.0, 2.0]))
    assert [(float(e), e.dtype) for e in floats] == [(1.0, np.float32), (2.0, np.float32)]
    ints = list(Dataset.from_tensor_slices([1, 2]))
    assert [(int(e), e.dtype) for e in ints] == [(1, np.int32), (2, np.int32)]
    rows = list(Dataset.from_tensor_slices([[1, 2], [3, 4]]))
    assert [(e.tolist(), e.dtype) for e in rows] == [([1, 2], np.int32), ([3, 4], np.int32)]
    pairs = list(Dataset.from_tensor_slices(([1, 2], [3.0, 4.0])))
    assert [(int(a), a.dtype, float(b), b.dtype) for a, b in pairs] == [(1, np.int32, 3.0, np.float32),
                                                                       (2, np.int32, 4.0, np.float32)]


def test_from_tensor_slices_with_different_lengths_raises_value_error_like_tf():
    """Components whose first dimensions differ raise ValueError when the dataset is built, as in TF."""
    with pytest.raises(ValueError, match="Dimensions 2 and 3 are not compatible"):
        Dataset.from_tensor_slices((np.zeros(2), np.zeros(3)))


# -- batch / unbatch ----------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 30), batch_size=st.integers(1, 7), drop_remainder=st.booleans())
def test_batch_groups_consecutive_elements(n, batch_size, drop_remainder):
    """batch(b) stacks b consecutive elements; the short last batch is kept unless drop_remainder."""
    ds = Dataset.range(n).batch(batch_size, drop_remainder=drop_remainder)
    batches = items(ds)
    full, rest = divmod(n, batch_size)
    expected = [list(range(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]
    if drop_remainder and rest:
        expected = expected[:-1]
    assert batches == expected
    assert ds.cardinality() == len(expected) == (full if drop_remainder else full + (rest > 0))
    assert ds.element_spec == md.TensorSpec((batch_size if drop_remainder else None,), np.int64)


def test_batch_of_a_tuple_stacks_each_component():
    """Batching a tuple element stacks each component separately, keeping its dtype and trailing shape."""
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.arange(5, dtype=np.int32)
    batches = list(Dataset.from_tensor_slices((x, y)).batch(2))
    assert [tuple(c.shape for c in b) for b in batches] == [((2, 2), (2,)), ((2, 2), (2,)), ((1, 2), (1,))]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), x)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), y)
    assert all(b[0].dtype == np.float32 and b[1].dtype == np.int32 for b in batches)


def _unfused(dataset):
    """``dataset`` with TF's map_and_batch_fusion off: its batch is TF's BatchDataset kernel."""
    options = md.Options()
    options.experimental_optimization.map_and_batch_fusion = False
    return dataset.with_options(options)


@pytest.mark.parametrize("make, message", [
    (lambda: _unfused(Dataset.range(3).map(lambda x: np.full([int(x) + 1], x)).batch(3)),
     ("Cannot batch tensors with different shapes in component 0. First element had shape [1] and element 1 had "
      "shape [2].")),
    (lambda: _unfused(Dataset.range(3).map(lambda x: (x, np.full([int(x) // 2 + 1], x))).batch(3)),
     ("Cannot batch tensors with different shapes in component 1. First element had shape [1] and element 2 had "
      "shape [2].")),
    (lambda: Dataset.range(3).map(lambda x: np.full([int(x) + 1], x)).batch(3),
     "Cannot add tensor to the batch: number of elements does not match. Shapes are: [tensor]: [2], [batch]: [1]"),
    (lambda: Dataset.range(3).map(lambda x: np.full([int(x) + 1], x)).batch(5, drop_remainder=True),
     "Cannot add tensor to the batch: number of elements does not match. Shapes are: [tensor]: [2], [batch]: [1]"),
])
def test_batch_of_different_shapes_raises_tfs_error(make, message):
    """Batching elements of different shapes raises TF 2.21's InvalidArgumentError: BatchDataset's text, or after a
    map (fused by default) MapAndBatch's, which checks every element as it comes, even of a batch it would drop."""
    with pytest.raises(errors.InvalidArgumentError) as info:
        list(make())
    assert str(info.value) == message


def test_batch_error_writes_shapes_like_tf():
    """The different-shapes error writes a rank-2 shape as TF does: '[1,2]'; after a map (TF's fused MapAndBatch)
    an element with as many values in another shape is copied in the first element's shape instead."""
    make = lambda: Dataset.range(2).map(lambda x: np.arange(2.0).reshape(1 + int(x), 2 - int(x))).batch(2)  # noqa: E731
    with pytest.raises(errors.InvalidArgumentError) as info:
        list(_unfused(make()))
    assert str(info.value) == ("Cannot batch tensors with different shapes in component 0. First element had shape "
                               "[1,2] and element 1 had shape [2,1].")
    assert items(make()) == [[[[0.0, 1.0]], [[0.0, 1.0]]]]


def test_batch_size_must_be_positive():
    """batch(0) raises TF's InvalidArgumentError."""
    with pytest.raises(errors.InvalidArgumentError, match="^Batch size must be greater than zero"):
        Dataset.range(3).batch(0)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 25), batch_size=st.integers(1, 6))
def test_unbatch_undoes_batch(n, batch_size):
    """batch(b).unbatch() gives back the original elements of every component, in order."""
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n, dtype=np.int64) * 3
    elements = list(Dataset.from_tensor_slices((x, y)).batch(batch_size).unbatch())
    assert len(elements) == n
    for i, (a, b) in enumerate(elements):
        np.testing.assert_array_equal(a, x[i])
        assert a.dtype == np.float32 and a.shape == (2,)
        assert int(b) == 3 * i and b.shape == ()


# -- map / filter ------------------------------------------------------------------------------------------------


def test_map_unpacks_a_tuple_element_into_positional_arguments():
    """map(fn) calls fn(*element) for a tuple element (nested tuples stay tuples) and fn(element) otherwise."""
    pairs = Dataset.from_tensor_slices((np.array([1, 2]), np.array([3, 4])))
    assert items(pairs.map(lambda a, b: a * 10 + b)) == [13, 24]
    assert items(pairs.map(lambda a, b: (b, a)).map(lambda b, a: b - a)) == [2, 2]
    nested = Dataset.from_tensor_slices(((np.array([1, 2]), np.array([3, 4])), np.array([5, 6])))
    assert items(nested.map(lambda ab, c: ab[0] + ab[1] + c)) == [9, 12]  # TF 2.21
    records = Dataset.from_tensor_slices({"a": np.array([1, 2]), "b": np.array([3, 4])})
    assert items(records.map(lambda d: d["a"] * d["b"])) == [3, 8]
    assert items(Dataset.range(3).map(lambda x: x * x)) == [0, 1, 4]


def test_map_converts_python_numbers_like_tf():
    """A map function returning a Python float gives float32, as tf.constant would."""
    out = list(Dataset.range(2).map(lambda x: 0.5))
    assert [(float(v), v.dtype) for v in out] == [(0.5, np.float32), (0.5, np.float32)]


def test_filter_keeps_elements_whose_predicate_is_true():
    """filter keeps matching elements in order, unpacking tuple elements like map."""
    assert items(Dataset.range(10).filter(lambda x: x % 3 == 0)) == [0, 3, 6, 9]
    pairs = Dataset.from_tensor_slices((np.array([1, 5, 2, 7]), np.array([4, 3, 2, 9])))
    assert items(pairs.filter(lambda a, b: a < b)) == [[1, 4], [7, 9]]
    assert items(Dataset.range(5).filter(lambda x: x > 10)) == []


# -- take / skip / repeat / shard ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 15), count=st.integers(-1, 20))
def test_take_and_skip_are_prefix_and_suffix(n, count):
    """take(k)/skip(k) are the first k / all but the first k elements; k = -1 means all / everything skipped."""
    whole = list(range(n))
    take, skip = Dataset.range(n).take(count), Dataset.range(n).skip(count)
    assert items(take) == (whole if count < 0 else whole[:count])
    assert items(skip) == ([] if count < 0 else whole[count:])
    assert take.cardinality() == len(items(take))
    assert skip.cardinality() == len(items(skip))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 6), count=st.integers(0, 4), total=st.integers(0, 20))
def test_repeat_finite_and_infinite(n, count, total):
    """repeat(k) plays the input k times; repeat() forever (cut with take); repeat() of an empty input ends."""
    assert items(Dataset.range(n).repeat(count)) == list(range(n)) * count
    assert Dataset.range(n).repeat(count).cardinality() == n * count
    endless = Dataset.range(n).repeat().take(total)
    assert items(endless) == ([list(range(n))[i % n] for i in range(total)] if n else [])


def test_repeat_reiterates_its_input_each_epoch():
    """Each repetition re-iterates the input pipeline (a map is re-applied on every epoch)."""
    calls = []
    ds = Dataset.range(3).map(lambda x: calls.append(int(x)) or x).repeat(2)
    assert items(ds) == [0, 1, 2, 0, 1, 2]
    assert calls == [0, 1, 2, 0, 1, 2]


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 30), num_shards=st.integers(1, 6), data=st.data())
def test_shard_takes_every_nth_element_from_index(n, num_shards, data):
    """shard(n, i) yields elements i, i + n, i + 2n, ... with a matching cardinality."""
    index = data.draw(st.integers(0, num_shards - 1))
    ds = Dataset.range(n).shard(num_shards, index)
    assert items(ds) == list(range(n))[index::num_shards]
    assert ds.cardinality() == len(range(n)[index::num_shards])


def test_shard_rejects_an_index_out_of_range_with_tfs_message():
    """shard(3, 3) raises TF's InvalidArgumentError."""
    with pytest.raises(errors.InvalidArgumentError, match=re.escape("Index must be between 0 and 2 (currently "
                                                                    "index = 3).")):
        Dataset.range(10).shard(3, 3)


# -- shuffle ------------------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), buffer_size=st.integers(1, 50), seed=st.integers(0, 2**31 - 1))
def test_seeded_shuffle_is_a_deterministic_permutation_within_the_buffer_window(n, buffer_size, seed):
    """shuffle(b, seed) permutes its input, the same way for the same seed, and output i comes from the first
    i + b inputs (TF's buffer semantics)."""
    first = items(Dataset.range(n).shuffle(buffer_size, seed=seed))
    again = items(Dataset.range(n).shuffle(buffer_size, seed=seed))
    assert sorted(first) == list(range(n))
    assert first == again
    assert all(x < i + buffer_size for i, x in enumerate(first))
    assert Dataset.range(n).shuffle(buffer_size, seed=seed).cardinality() == n


def test_shuffle_with_a_buffer_of_one_keeps_the_order():
    """shuffle(1) cannot reorder anything, as in TF."""
    assert items(Dataset.range(10).shuffle(1, seed=4)) == list(range(10))


def test_reshuffle_each_iteration_changes_the_order_between_epochs():
    """With reshuffle_each_iteration (the default) each epoch has a new order; the sequence of orders is seeded."""
    ds = Dataset.range(20).shuffle(20, seed=11)
    epoch1, epoch2 = items(ds), items(ds)
    assert sorted(epoch1) == sorted(epoch2) == list(range(20))
    assert epoch1 != epoch2
    fresh = Dataset.range(20).shuffle(20, seed=11)
    assert [items(fresh), items(fresh)] == [epoch1, epoch2]
    repeated = items(Dataset.range(20).shuffle(20, seed=11).repeat(2))
    assert repeated[:20] != repeated[20:]
    assert sorted(repeated[:20]) == sorted(repeated[20:]) == list(range(20))


def test_reshuffle_each_iteration_false_keeps_the_order():
    """With reshuffle_each_iteration=False every epoch repeats the first epoch's order."""
    ds = Dataset.range(20).shuffle(20, seed=11, reshuffle_each_iteration=False)
    epoch1 = items(ds)
    assert epoch1 != list(range(20)) and sorted(epoch1) == list(range(20))
    assert items(ds) == epoch1
    repeated = items(Dataset.range(20).shuffle(20, seed=11, reshuffle_each_iteration=False).repeat(3))
    assert repeated == epoch1 * 3


# -- cardinality --------------------------------------------------------------------------------------------------


def _true(*_):
    return np.bool_(True)


def _pair(x):
    return Dataset.range(2)


# (pipeline, TF 2.21's cardinality)
CARDINALITIES = {
    "range": (lambda: Dataset.range(5), 5),
    "batch": (lambda: Dataset.range(10).batch(3), 4),
    "batch_drop_remainder": (lambda: Dataset.range(10).batch(3, drop_remainder=True), 3),
    "repeat_forever": (lambda: Dataset.range(5).repeat(), INFINITE_CARDINALITY),
    "repeat_twice": (lambda: Dataset.range(5).repeat(2), 10),
    "repeat_empty_forever": (lambda: Dataset.range(0).repeat(), 0),
    "filter": (lambda: Dataset.range(5).filter(_true), UNKNOWN_CARDINALITY),
    "filter_repeat_twice": (lambda: Dataset.range(5).filter(_true).repeat(2), UNKNOWN_CARDINALITY),
    "filter_repeat_zero": (lambda: Dataset.range(5).filter(_true).repeat(0), 0),
    "filter_take": (lambda: Dataset.range(5).filter(_true).take(2), UNKNOWN_CARDINALITY),
    "map": (lambda: Dataset.range(5).map(lambda x: x), 5),
    "shuffle": (lambda: Dataset.range(5).shuffle(3), 5),
    "take_more_than_there_is": (lambda: Dataset.range(5).take(9), 5),
    "take_all": (lambda: Dataset.range(5).take(-1), 5),
    "skip_past_the_end": (lambda: Dataset.range(5).skip(7), 0),
    "skip_all": (lambda: Dataset.range(5).skip(-1), 0),
    "shard": (lambda: Dataset.range(10).shard(3, 1), 3),
    "infinite_take": (lambda: Dataset.range(5).repeat().take(7), 7),
    "infinite_map": (lambda: Dataset.range(5).repeat().map(lambda x: x), INFINITE_CARDINALITY),
    "infinite_batch": (lambda: Dataset.range(5).repeat().batch(4), INFINITE_CARDINALITY),
    "infinite_shuffle": (lambda: Dataset.range(5).repeat().shuffle(3), INFINITE_CARDINALITY),
    "infinite_skip": (lambda: Dataset.range(5).repeat().skip(2), INFINITE_CARDINALITY),
    "infinite_filter": (lambda: Dataset.range(5).repeat().filter(_true), UNKNOWN_CARDINALITY),
    "flat_map": (lambda: Dataset.range(5).flat_map(_pair), UNKNOWN_CARDINALITY),
    "interleave": (lambda: Dataset.range(5).interleave(_pair, cycle_length=2), UNKNOWN_CARDINALITY),
    "unbatch": (lambda: Dataset.range(10).batch(4).unbatch(), UNKNOWN_CARDINALITY),
    "rebatch": (lambda: Dataset.range(10).batch(4).rebatch(2), UNKNOWN_CARDINALITY),
    "filter_repeat_forever": (lambda: Dataset.range(5).filter(_true).repeat(), INFINITE_CARDINALITY),
    "infinite_flat_map": (lambda: Dataset.range(5).repeat().flat_map(_pair), UNKNOWN_CARDINALITY),
    "infinite_interleave": (lambda: Dataset.range(5).repeat().interleave(_pair, cycle_length=2),
                            UNKNOWN_CARDINALITY),
    "infinite_rebatch": (lambda: Dataset.range(5).repeat().batch(4).rebatch(2), UNKNOWN_CARDINALITY),
    "infinite_unbatch": (lambda: Dataset.range(5).repeat().batch(4).unbatch(), INFINITE_CARDINALITY),
}

@pytest.mark.parametrize("name", list(CARDINALITIES))
def test_cardinality_matches_tf(name):
    """cardinality() is TF 2.21's: known counts, INFINITE_CARDINALITY for repeat(), UNKNOWN for filter etc."""
    make, expected = CARDINALITIES[name]
    assert make().cardinality() == expected


def test_cardinality_constants_are_tfs():
    """INFINITE_CARDINALITY and UNKNOWN_CARDINALITY have TF's values."""
    assert (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY) == (-1, -2)
    assert (md.experimental.INFINITE_CARDINALITY, md.experimental.UNKNOWN_CARDINALITY) == (-1, -2)


# -- interleave / flat_map -------------------------------------------------------------------------------------------


def test_interleave_order_matches_tf():
    """range(3).interleave(range(10x, 10x + 4), cycle_length=2, block_length=2) gives TF 2.21's exact order."""
    ds = Dataset.range(3).interleave(lambda x: Dataset.range(x * 10, x * 10 + 4), cycle_length=2, block_length=2)
    assert items(ds) == [0, 1, 10, 11, 2, 3, 12, 13, 20, 21, 22, 23]  # TF 2.21


def _ragged(x):
    """Inner datasets of lengths 1, 2, 3, 1, 2 for x = 0..4."""
    x = int(x)
    return Dataset.range(x * 10, x * 10 + x % 3 + 1)


@pytest.mark.parametrize("cycle_length, block_length, expected", [  # TF 2.21
    (1, 2, [0, 10, 11, 20, 21, 22, 30, 40, 41]),
    (2, 1, [0, 10, 11, 20, 21, 30, 22, 40, 41]),
    (3, 2, [0, 10, 11, 20, 21, 30, 22, 40, 41]),
    (5, 3, [0, 10, 11, 20, 21, 22, 30, 40, 41]),
])
def test_interleave_of_ragged_inputs_refills_slots_like_tf(cycle_length, block_length, expected):
    """When an inner dataset ends, its slot is refilled from the input as TF 2.21 does."""
    ds = Dataset.range(5).interleave(_ragged, cycle_length=cycle_length, block_length=block_length)
    assert items(ds) == expected


def test_interleave_without_cycle_length_uses_one_slot_per_schedulable_core(monkeypatch):
    """TF's default (AUTOTUNE) cycle length is the number of CPU cores the process may run on."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    ds = Dataset.range(4).interleave(lambda x: Dataset.range(x * 10, x * 10 + 2))
    assert items(ds) == [0, 10, 20, 1, 11, 21, 30, 31]


def test_flat_map_concatenates_in_input_order():
    """flat_map concatenates the datasets its function returns, input by input."""
    assert items(Dataset.range(3).flat_map(lambda x: Dataset.range(x * 10, x * 10 + 2))) == [0, 1, 10, 11, 20, 21]
    assert items(Dataset.range(5).flat_map(_ragged)) == [0, 10, 11, 20, 21, 22, 30, 40, 41]
    pairs = Dataset.from_tensor_slices((np.array([1, 2]), np.array([2, 0])))
    assert items(pairs.flat_map(lambda start, n: Dataset.range(start, start + n))) == [1, 2]


# -- rebatch ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, batch_size, sizes, drop_remainder, expected", [  # TF 2.21
    (10, 4, [3, 0, 2], False, [[0, 1, 2], [], [3, 4], [5, 6, 7], [], [8, 9]]),
    (10, 4, [3, 0, 2], True, [[0, 1, 2], [], [3, 4], [5, 6, 7], [], [8, 9]]),
    (7, 3, [4], False, [[0, 1, 2, 3], [4, 5, 6]]),
    (7, 3, [4], True, [[0, 1, 2, 3]]),
    (4, 2, [4, 0], False, [[0, 1, 2, 3], []]),
    (4, 2, [3, 0], False, [[0, 1, 2], [], [3]]),
    (0, 2, [0, 1], False, [[]]),
    (3, 3, [0, 2], False, [[], [0, 1], [], [2]]),
])
def test_rebatch_matches_tf(n, batch_size, sizes, drop_remainder, expected):
    """rebatch(sizes) crosses input batch boundaries, yields empty batches for 0, and a short final batch."""
    ds = Dataset.range(n).batch(batch_size).rebatch(sizes, drop_remainder=drop_remainder)
    batches = list(ds)
    assert [b.tolist() for b in batches] == expected
    assert all(b.dtype == np.int64 and b.ndim == 1 for b in batches)


def rebatch_reference(n: int, sizes: list[int], drop_remainder: bool) -> list[list[int]]:
    """TF's RebatchDatasetV2 over elements 0..n-1 (checked against TF 2.21 on 150 random cases): cycle through
    ``sizes``; a batch that comes out short ends the dataset (dropped with drop_remainder); a size-0 entry
    yields an empty batch until the end of the input has been seen."""
    out, pos, i = [], 0, 0
    while True:
        desired = sizes[i % len(sizes)]
        i += 1
        take = min(desired, n - pos)
        if take < desired:
            if take and not drop_remainder:
                out.append(list(range(pos, pos + take)))
            return out
        out.append(list(range(pos, pos + take)))
        pos += take


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 20), batch_size=st.integers(1, 6),
       sizes=st.lists(st.integers(0, 5), min_size=1, max_size=4).filter(any), drop_remainder=st.booleans())
def test_rebatch_property_against_tfs_rule(n, batch_size, sizes, drop_remainder):
    """rebatch(sizes) over any batching of range(n) follows TF's rule, independently of the input batch size."""
    ds = Dataset.range(n).batch(batch_size).rebatch(sizes, drop_remainder=drop_remainder)
    assert items(ds) == rebatch_reference(n, sizes, drop_remainder)


def test_rebatch_keeps_structure_dtype_and_trailing_shape_in_empty_batches():
    """Empty rebatched batches keep each component's dtype and trailing dimensions (TF 2.21)."""
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.arange(5, dtype=np.int32)
    batches = list(Dataset.from_tensor_slices((x, y)).batch(2).rebatch([0, 3]))
    assert [tuple((c.shape, c.dtype) for c in b) for b in batches] == [
        (((0, 2), np.float32), ((0,), np.int32)), (((3, 2), np.float32), ((3,), np.int32)),
        (((0, 2), np.float32), ((0,), np.int32)), (((2, 2), np.float32), ((2,), np.int32))]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), x)


def test_rebatch_of_only_zero_sizes_yields_empty_batches_forever():
    """rebatch([0, 0]) never consumes input: an endless stream of empty batches, as in TF 2.21."""
    assert items(Dataset.range(3).batch(3).rebatch([0, 0]).take(3)) == [[], [], []]


# -- TextLineDataset ------------------------------------------------------------------------------------------------


def test_text_line_dataset_yields_lines_without_line_endings_as_bytes(tmp_path: Path):
    """TextLineDataset yields each line as a scalar byte string without '\\n' or '\\r\\n', file after file."""
    first, empty, last = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    first.write_bytes(b"a\r\nb\n\nc")  # TF 2.21: [b'a', b'b', b'', b'c']
    empty.write_bytes(b"")
    last.write_bytes("x y\n\u00e9\n".encode())
    lines = list(md.TextLineDataset([str(first), str(empty), str(last)]))
    assert [line.item() for line in lines] == [b"a", b"b", b"", b"c", b"x y", "\u00e9".encode()]
    assert all(line.shape == () and line.dtype == STRING for line in lines)
    assert [line.item() for line in md.TextLineDataset(str(last))] == [b"x y", "\u00e9".encode()]


def _numbered_files(directory: Path, count: int) -> list[str]:
    names = []
    for i in range(count):
        path = directory / f"part-{i:03d}.txt"
        path.write_text(f"{i}a\n{i}b\n")
        names.append(str(path))
    return names


def test_text_line_dataset_opens_files_lazily_one_at_a_time(tmp_path: Path):
    """Deleting a later file after the first line is read only fails when iteration reaches it (NotFoundError)."""
    files = _numbered_files(tmp_path, 5)
    iterator = iter(md.TextLineDataset(files))
    assert next(iterator).item() == b"0a"
    os.remove(files[3])
    seen = []
    with pytest.raises(errors.NotFoundError) as info:
        for line in iterator:
            seen.append(line.item())
    assert seen == [b"0b", b"1a", b"1b", b"2a", b"2b"]  # TF 2.21 gives the same lines, then NotFoundError
    assert str(info.value) == f"{files[3]}; No such file or directory"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd to count open files")
def test_text_line_dataset_holds_at_most_one_file_open(tmp_path: Path):
    """Iterating 200 files never holds more than one of them open at a time."""
    files = _numbered_files(tmp_path, 200)
    before = len(os.listdir("/proc/self/fd"))
    most = 0
    count = 0
    for _ in md.TextLineDataset(files):
        most = max(most, len(os.listdir("/proc/self/fd")) - before)
        count += 1
    assert count == 400
    assert most <= 1


# -- NumpyFileDataset -----------------------------------------------------------------------------------------------


def test_numpy_file_dataset_reads_rows_of_npy_files(tmp_path: Path):
    """Each .npy file contributes its rows (dtype and row shape kept), file after file."""
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    b = np.arange(100, 104, dtype=np.float32).reshape(2, 2)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    rows = list(md.NumpyFileDataset([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")]))
    assert len(rows) == 5
    np.testing.assert_array_equal(np.stack(rows), np.concatenate([a, b]))
    assert all(r.dtype == np.float32 and r.shape == (2,) for r in rows)


def test_numpy_file_dataset_reads_npz_rows_as_dicts_or_tuples(tmp_path: Path):
    """A .npz gives one dict per row (all arrays), or a tuple in the order of ``keys``."""
    path = str(tmp_path / "data.npz")
    np.savez(path, x=np.arange(6).reshape(3, 2), y=np.array([1.0, 2.0, 3.0]), z=np.array([7, 8, 9], np.int32))
    dicts = list(md.NumpyFileDataset(path))
    assert [sorted(d) for d in dicts] == [["x", "y", "z"]] * 3
    assert [(d["x"].tolist(), float(d["y"]), int(d["z"])) for d in dicts] == [
        ([0, 1], 1.0, 7), ([2, 3], 2.0, 8), ([4, 5], 3.0, 9)]
    tuples = list(md.NumpyFileDataset(path, keys=["y", "x"]))
    assert all(isinstance(t, tuple) and len(t) == 2 for t in tuples)
    assert [(float(y), x.tolist()) for y, x in tuples] == [(1.0, [0, 1]), (2.0, [2, 3]), (3.0, [4, 5])]


def test_numpy_file_dataset_missing_npz_key_raises(tmp_path: Path):
    """Asking for a key the .npz does not have raises InvalidArgumentError naming it and the keys present."""
    path = str(tmp_path / "data.npz")
    np.savez(path, x=np.arange(3), y=np.arange(3))
    with pytest.raises(errors.InvalidArgumentError) as info:
        list(md.NumpyFileDataset(path, keys=["x", "label"]))
    assert "['label']" in str(info.value) and "['x', 'y']" in str(info.value) and path in str(info.value)


class _Payload:
    """Unpickling this object creates ``marker``: proof that a pickle was executed."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


def _pickled_arrays(tmp_path: Path, tag: str) -> tuple[str, str, Path]:
    marker = tmp_path / f"unpickled-{tag}"
    array = np.array([_Payload(str(marker)), None], dtype=object)
    npy, npz = tmp_path / f"{tag}.npy", tmp_path / f"{tag}.npz"
    np.save(npy, array, allow_pickle=True)
    np.savez(npz, rows=array)
    return str(npy), str(npz), marker


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_numpy_file_dataset_refuses_pickled_object_arrays_without_unpickling(tmp_path: Path, kind):
    """A pickled object array (.npy or inside .npz) is refused with an error, and its pickle never runs."""
    control_npy, control_npz, control_marker = _pickled_arrays(tmp_path, "control")
    loaded = np.load(control_npy if kind == "npy" else control_npz, allow_pickle=True)
    _ = loaded if kind == "npy" else loaded["rows"]
    assert control_marker.exists()  # the payload really runs when a pickle is loaded
    npy, npz, marker = _pickled_arrays(tmp_path, "attack")
    with pytest.raises((errors.OpError, ValueError), match=r"(?i)object|pickle"):
        list(md.NumpyFileDataset(npy if kind == "npy" else npz))
    assert not marker.exists()


def test_numpy_file_dataset_pickle_error_names_the_file_for_npz_too(tmp_path: Path):
    """The refusal is the same DataLossError naming the file for .npz as for .npy."""
    npy, npz, _ = _pickled_arrays(tmp_path, "attack")
    with pytest.raises(errors.DataLossError, match=re.escape(npy)):
        list(md.NumpyFileDataset(npy))
    with pytest.raises(errors.DataLossError, match=re.escape(npz)):
        list(md.NumpyFileDataset(npz))


# -- list_files ------------------------------------------------------------------------------------------------------


@pytest.fixture
def some_files(tmp_path: Path) -> Path:
    for name in ["b.txt", "a.txt", "c.csv", "a2.txt"]:
        (tmp_path / name).write_text("x\n")
    return tmp_path


def _names(dataset: Dataset, directory: Path) -> list[str]:
    return [os.path.relpath(name.item().decode(), directory) for name in dataset]


def test_list_files_without_shuffle_is_sorted(some_files: Path):
    """list_files(shuffle=False) gives the matching paths sorted, as byte strings (over several patterns too)."""
    ds = Dataset.list_files(str(some_files / "*.txt"), shuffle=False)
    assert _names(ds, some_files) == ["a.txt", "a2.txt", "b.txt"]
    assert all(isinstance(name.item(), bytes) for name in ds)
    both = Dataset.list_files([str(some_files / "c*"), str(some_files / "*.txt")], shuffle=False)
    assert _names(both, some_files) == ["a.txt", "a2.txt", "b.txt", "c.csv"]


def test_list_files_keeps_a_file_once_per_matching_pattern(some_files: Path):
    """A file matched by two patterns is listed twice, as in TF 2.21."""
    ds = Dataset.list_files([str(some_files / "c*"), str(some_files / "*.txt"), str(some_files / "a.txt")],
                            shuffle=False)
    assert _names(ds, some_files) == ["a.txt", "a.txt", "a2.txt", "b.txt", "c.csv"]  # TF 2.21


def test_list_files_seeded_shuffle_is_a_deterministic_permutation(some_files: Path):
    """list_files(seed=s) shuffles the sorted matches, the same way for the same seed."""
    pattern = str(some_files / "*")
    orders = {tuple(_names(Dataset.list_files(pattern, seed=seed), some_files)) for seed in range(8)}
    assert all(sorted(order) == ["a.txt", "a2.txt", "b.txt", "c.csv"] for order in orders)
    assert len(orders) > 1  # the seed matters
    for seed in range(3):
        assert _names(Dataset.list_files(pattern, seed=seed), some_files) == _names(
            Dataset.list_files(pattern, seed=seed), some_files)


def test_list_files_without_a_match_raises_tfs_error(tmp_path: Path):
    """No match raises TF 2.21's InvalidArgumentError naming the pattern(s)."""
    pattern = str(tmp_path / "*.zzz")
    with pytest.raises(errors.InvalidArgumentError) as info:
        Dataset.list_files(pattern)
    assert str(info.value) == ("Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. Summarized data: "
                               f"b'No files matched pattern: {pattern}'")
    other = str(tmp_path / "*.yyy")
    with pytest.raises(errors.InvalidArgumentError, match=re.escape(f"No files matched pattern: {pattern}, {other}")):
        Dataset.list_files([pattern, other], shuffle=False)


def test_fused_shuffle_repeat_zero_fails_when_the_iterator_is_created():
    """TF fuses shuffle().repeat(0) into ShuffleAndRepeat, whose kernel rejects count 0 as soon as the pipeline's
    iterator is created, even where no element would ever be read through it."""
    ds = Dataset.range(4).shuffle(2, seed=1).repeat(0).repeat(0)
    with pytest.raises(errors.InvalidArgumentError, match="count must be greater than zero or equal to -1"):
        iter(ds)
    options = md.Options()
    options.experimental_optimization.shuffle_and_repeat_fusion = False
    assert items(ds.with_options(options)) == []


def test_cache_replays_the_first_complete_pass_and_discards_an_unfinished_one():
    ds = Dataset.range(6).shuffle(6, seed=3).cache()
    partial = iter(ds)
    next(partial)
    first = items(ds)
    assert items(ds) == first and sorted(first) == list(range(6))
    reshuffled = Dataset.range(6).shuffle(6, seed=3)
    assert items(reshuffled) != items(reshuffled)  # without the cache every pass reshuffles


# -- zip / concatenate / enumerate / from_generator (orders checked against TF in conformance/pipelines) ----------


def test_zip_takes_a_nest_of_datasets_and_follows_tfs_cardinality():
    pairs = Dataset.zip((Dataset.range(2), Dataset.range(3)))
    assert [tuple(int(v) for v in p) for p in pairs] == [(0, 0), (1, 1)]
    named = Dataset.zip({"a": Dataset.range(2), "b": Dataset.range(1)})
    assert [{k: int(v) for k, v in e.items()} for e in named] == [{"a": 0, "b": 0}]
    assert Dataset.zip(Dataset.range(2).repeat(), Dataset.range(3)).cardinality() == 3
    assert Dataset.zip((Dataset.range(2).repeat(), Dataset.range(3).repeat())).cardinality() == INFINITE_CARDINALITY
    unknown = Dataset.range(2).filter(lambda x: x > 0)
    assert Dataset.zip((unknown, Dataset.range(0))).cardinality() == UNKNOWN_CARDINALITY  # TF: unknown wins
    with pytest.raises(TypeError, match="Python `list` is not supported"):
        Dataset.zip([Dataset.range(2), Dataset.range(3)])


def test_concatenate_and_enumerate():
    both = Dataset.range(2).concatenate(Dataset.range(5, 7))
    assert items(both) == [0, 1, 5, 6] and both.cardinality() == 4
    with pytest.raises(TypeError, match="Incompatible dataset elements"):
        Dataset.range(2).concatenate(Dataset.range(2).map(lambda x: x * 1.0))
    numbered = list(Dataset.range(2).enumerate(start=3))
    assert [(i.dtype, int(i), int(x)) for i, x in numbered] == [(np.int64, 3, 0), (np.int64, 4, 1)]


def test_from_generator_converts_checks_and_restarts_the_generator():
    ds = Dataset.from_generator(lambda: ((i, [i] * 2) for i in range(3)),
                                output_signature=(md.TensorSpec((), np.int32), md.TensorSpec((2,), np.float32)))
    first = list(ds)
    assert [(a.dtype, b.dtype, b.shape) for a, b in first] == [(np.int32, np.float32, (2,))] * 3
    assert len(list(ds)) == 3 and ds.cardinality() == UNKNOWN_CARDINALITY
    unknown = Dataset.from_generator(lambda: (np.ones((i, 2)) for i in range(3)), output_types=np.float32)
    assert unknown.element_spec == md.TensorSpec((None, None), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"yielded an element of shape \(3,\) where an element of "
                                                          r"shape \(2,\) was expected"):
        list(Dataset.from_generator(lambda: iter([[1, 2, 3]]), output_types=np.int32, output_shapes=(2,)))
    with pytest.raises(errors.InvalidArgumentError, match="could not be converted to the expected type"):
        list(Dataset.from_generator(lambda: iter(["a"]), output_types=np.int32, output_shapes=()))
    with pytest.raises(errors.InvalidArgumentError, match="did not match the expected structure"):
        list(Dataset.from_generator(lambda: iter([1.5]), output_types=np.int32))  # converted as convert_to_tensor
    with pytest.raises(errors.NotFoundError, match="unshardable source dataset: GeneratorDataset"):
        from mirrorlab.tf.data.sharding import shard_by_file
        shard_by_file(unknown, 2, 0)


def test_fusion_sees_through_nodes_tf_eliminates_and_cache_completes_at_the_known_count():
    """TF's noop_elimination drops skip(0), take(-1), shard(1, 0) before fusing shuffle with repeat, so
    shuffle().skip(0).repeat(0) fails like shuffle().repeat(0); a cache whose input has a known cardinality
    is complete once that many elements were read, even if the end was never reached."""
    for noop in (lambda d: d.skip(0), lambda d: d.take(-1), lambda d: d.shard(1, 0)):
        with pytest.raises(errors.InvalidArgumentError, match="count must be greater than zero"):
            iter(noop(Dataset.range(3).shuffle(2, seed=1)).repeat(0))
    cached = Dataset.range(7).shuffle(12, seed=-3).cache()
    reader = iter(cached)
    first = [int(next(reader)) for _ in range(7)]  # all 7 elements, end-of-sequence never asked for
    assert items(cached) == first == [4, 1, 2, 3, 0, 5, 6]  # TF 2.21


# -- values, specs and options as TF 2.21 gives them (the conformance suites compare elements, not these) -------


def test_as_numpy_iterator_gives_what_tfs_numpy_gives():
    """Rank 0: a NumPy scalar (``bytes`` for a string); otherwise an array (strings as an object array)."""
    numbers = list(Dataset.range(2).as_numpy_iterator())
    assert [type(v) for v in numbers] == [np.int64, np.int64]
    strings = list(Dataset.from_tensor_slices(["a", "bc"]).as_numpy_iterator())
    assert strings == [b"a", b"bc"] and all(type(v) is bytes for v in strings)
    batch = next(Dataset.from_tensor_slices(["a", "bc"]).batch(2).as_numpy_iterator())
    assert batch.dtype == object and batch.tolist() == [b"a", b"bc"]
    nested = next(Dataset.from_tensor_slices(([1], {"s": ["x"]})).as_numpy_iterator())
    assert nested == (np.int32(1), {"s": b"x"}) and type(nested[0]) is np.int32


def test_element_specs_print_and_type_strings_as_tf():
    """TF 2.21's reprs; strings have TF's numpy dtype (object) in specs, padded batches keep padded dims."""
    assert repr(Dataset.range(3).element_spec) == "TensorSpec(shape=(), dtype=tf.int64, name=None)"
    assert repr(md.TensorSpec(None, np.bytes_)) == "TensorSpec(shape=<unknown>, dtype=tf.string, name=None)"
    assert md.TextLineDataset([]).element_spec == md.TensorSpec((), object)
    assert repr(Dataset.from_tensors(["a", "b"]).element_spec) == "TensorSpec(shape=(2,), dtype=tf.string, name=None)"
    assert repr(Dataset.range(7).batch(3).padded_batch(2, padded_shapes=[5], drop_remainder=True).element_spec) \
        == "TensorSpec(shape=(2, 5), dtype=tf.int64, name=None)"
    assert repr(Dataset.range(7).batch(3).padded_batch(2).element_spec) \
        == "TensorSpec(shape=(None, None), dtype=tf.int64, name=None)"


def test_options_refuse_unknown_names_and_other_types_with_tfs_errors():
    options = md.Options()
    with pytest.raises(AttributeError, match="^Cannot set the property bogus on Options.$"):
        options.bogus = 1
    with pytest.raises(TypeError, match=re.escape("Property \"deterministic\" must be of type <class 'bool'>, got: 3 "
                                                  "(type: <class 'int'>)")):
        options.deterministic = 3
    with pytest.raises(TypeError, match="must be of type <enum 'AutoShardPolicy'>"):
        options.experimental_distribute.auto_shard_policy = 2
    options.threading.private_threadpool_size = 2
    merged = Dataset.range(2).with_options(options).options()
    assert merged.threading.private_threadpool_size == 2 and merged.deterministic is None


def test_window_reads_its_input_only_as_far_as_the_window_needs():
    """Windows are streamed: the first window of 3 reads 3 elements, not the (endless) input."""
    read: list[int] = []

    def generator():
        for i in range(10**9):
            read.append(i)
            yield i

    windows = iter(Dataset.from_generator(generator, output_types=np.int64).window(3, shift=2))
    assert items(next(windows)) == [0, 1, 2] and read == [0, 1, 2]
    assert items(next(windows)) == [2, 3, 4] and read == [0, 1, 2, 3, 4]


def test_creating_an_iterator_draws_every_shuffles_seeds_as_tf():
    """An iterator created and never read still advances the shuffles on its pipeline (orders recorded from TF 2.21),
    for a plain pipeline and a distributed one."""
    def passes(ds, count):
        return [[np.asarray(v).tolist() for v in ds] for _ in range(count)]

    ds = Dataset.range(6).shuffle(6, seed=3).batch(6).map(lambda x: x)
    iter(ds)
    assert passes(ds, 2) == [[[0, 4, 1, 5, 3, 2]], [[2, 4, 5, 3, 0, 1]]]
    strategy = ml.MirroredStrategy(["CPU:0"])
    dist = strategy.experimental_distribute_dataset(Dataset.range(6).shuffle(6, seed=3).batch(6))
    assert passes(dist, 1) == [[[0, 1, 2, 3, 4, 5]]]
    iter(dist)
    assert passes(dist, 2) == [[[2, 4, 5, 3, 0, 1]], [[2, 0, 4, 1, 3, 5]]]


def test_the_global_seed_fixes_shuffles_as_tfs_does():
    """``tf.random.set_seed`` pairs with a shuffle's own seed and gives unseeded shuffles TF's op seeds (orders
    recorded from TF 2.21), in a simulated worker as in a plain process."""
    def passes(ds):
        return [[int(v) for v in ds] for _ in range(2)]

    def program():
        ml.random.set_seed(1)
        first = passes(Dataset.range(8).shuffle(8))
        seeded = passes(Dataset.range(8).shuffle(8, seed=3))
        second = passes(Dataset.range(8).shuffle(8))
        ml.keras.utils.set_random_seed(5)
        return first, seeded, second, passes(Dataset.range(8).shuffle(4))

    expected = ([[6, 4, 2, 3, 0, 7, 5, 1], [0, 4, 3, 1, 2, 6, 7, 5]], [[5, 4, 0, 1, 2, 3, 7, 6], [6, 1, 0, 4, 2, 5, 7, 3]],
                [[5, 3, 7, 0, 6, 2, 1, 4], [5, 2, 3, 7, 1, 4, 6, 0]], [[1, 0, 4, 6, 5, 3, 2, 7], [3, 2, 1, 5, 6, 4, 7, 0]])
    assert SimCluster(workers=1).run(program).values() == [expected]
    with pytest.raises(ValueError, match="^Expected `seed` argument to be an integer. Received: seed=5.0"):
        ml.keras.utils.set_random_seed(5.0)


def test_cardinality_is_a_scalar_int64_tensor_as_in_tf():
    ds = Dataset.range(10).batch(3)
    count = ds.cardinality()
    assert count.dtype == np.int64 and count.shape == () and count.numpy() == 4 and type(count.numpy()) is np.int64
    assert ds.repeat().cardinality().numpy() == ml.data.INFINITE_CARDINALITY
    assert ds.filter(lambda x: True).cardinality().numpy() == ml.data.UNKNOWN_CARDINALITY


# -- random and sample_from_datasets ------------------------------------------------------------------------


def test_random_yields_tfs_philox_samples_and_rerandomizes_on_request():
    """Dataset.random(seed=4): TF 2.21's first samples; the same each pass unless rerandomize_each_iteration."""
    fixed = Dataset.random(seed=4).take(5)
    assert items(fixed) == items(fixed) == [3128586565, 2023892699, 452966358, 4293674553, 1485036815]
    fresh = Dataset.random(seed=4, rerandomize_each_iteration=True).take(3)
    assert items(fresh) == [1905554911, 4215726141, 1283758208]  # TF 2.21
    assert items(fresh) == [1683472663, 2279948892, 2709632186]
    assert Dataset.random().cardinality() == INFINITE_CARDINALITY
    assert Dataset.random().element_spec == md.TensorSpec((), np.int64)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 12), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1),
       weights=st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]), min_size=4, max_size=4), stop=st.booleans())
def test_sample_from_datasets_reads_each_input_in_order_and_loses_nothing(sizes, seed, weights, stop):
    """Every input is read in its own order; without stop_on_empty_dataset all elements of the inputs with a
    positive weight come out (a weight so small that its float32 is 0 would hang, in TF too), with it the sampling
    ends when a drawn input has ended; a seed replays."""
    inputs = [Dataset.range(100 * k, 100 * k + n) for k, n in enumerate(sizes)]
    weights = weights[:len(sizes)]
    ds = Dataset.sample_from_datasets(inputs, weights=weights, seed=seed, stop_on_empty_dataset=stop)
    out = items(ds)
    assert out == items(ds)
    kept = [k for k, w in enumerate(weights) if w > 0]  # (zero weights drop their inputs, as TF)
    for k in range(len(sizes)):
        mine = [x for x in out if x // 100 == k]
        assert mine == list(range(100 * k, 100 * k + len(mine)))
        if k not in kept:
            assert mine == []
        elif not stop:
            assert len(mine) == sizes[k]


def test_sample_from_datasets_refuses_bad_weights_and_empty_lists_as_tf():
    """TF 2.21's errors: no datasets, weights of another length, integer weights."""
    with pytest.raises(ValueError, match="`datasets` should not be empty"):
        Dataset.sample_from_datasets([])
    with pytest.raises(ValueError, match=re.escape("`len(weights)=1` vs. `len(datasets)=2`")):
        Dataset.sample_from_datasets([Dataset.range(2), Dataset.range(2)], weights=[1.0])
    with pytest.raises(TypeError, match="must be either `tf.float32` or `tf.float64` but is <dtype: 'int32'>"):
        Dataset.sample_from_datasets([Dataset.range(2), Dataset.range(2)], weights=[1, 2])


def test_choose_from_datasets_without_stop_ends_once_every_input_has_ended():
    """An endless choice dataset does not keep the pipeline running after the last input ended (TF 2.21)."""
    ds = Dataset.choose_from_datasets([Dataset.range(2), Dataset.range(10, 11)], Dataset.range(2).repeat(),
                                      stop_on_empty_dataset=False)
    assert items(ds) == [0, 10, 1]


# -- group_by_window and bucket_by_sequence_length -----------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.integers(-20, 20), max_size=30), keys=st.integers(1, 4), window=st.integers(1, 4))
def test_group_by_window_emits_full_windows_then_leftovers_by_key(values, keys, window):
    """Every element comes out once, in a batch of its own key; full windows come out as they fill (in input
    order of their last element), the partial ones at the end in ascending key order, as TF 2.21's std::map."""
    ds = Dataset.from_tensor_slices(np.array(values, np.int64)).group_by_window(
        lambda x: x % keys, lambda key, w: w.batch(window), window_size=window)
    batches = items(ds)
    assert sorted(v for b in batches for v in b) == sorted(values)
    assert all(len({v % keys for v in b}) == 1 for b in batches)
    full = [b for b in batches if len(b) == window]
    leftovers = batches[len(full):]
    assert all(len(b) == window for b in batches[:len(full)])
    assert [b[0] % keys for b in leftovers] == sorted(b[0] % keys for b in leftovers)


def test_group_by_window_checks_its_arguments_as_tf():
    """TF 2.21's errors: both or neither window size, a non-int64 key, a reduce_func without a dataset, size 0."""
    ds = Dataset.range(6)
    with pytest.raises(ValueError, match="Either the `window_size` argument or the `window_size_func`"):
        ds.group_by_window(lambda x: x, lambda k, w: w)
    with pytest.raises(ValueError, match="requested dtype int64 for Tensor with dtype int32"):
        ds.group_by_window(lambda x: ml.cast(x, ml.int32), lambda k, w: w, window_size=2)
    with pytest.raises(TypeError, match="`reduce_func` must return a single `tf.data.Dataset`"):
        ds.group_by_window(lambda x: x, lambda k, w: 3, window_size=2)
    with pytest.raises(errors.InvalidArgumentError, match="Window size must be greater than zero, but got 0"):
        list(ds.group_by_window(lambda x: x, lambda k, w: w, window_size=0))


def test_bucket_by_sequence_length_pads_each_bucket_like_tf():
    """Lengths 3,1,5,2,7 with boundaries [3, 6] and batch size 2: TF 2.21's batches (padded to the longest in
    each), a batch dimension it cannot know, and the boundary padding."""
    lengths = [3, 1, 5, 2, 7, 4, 6, 1, 2, 8, 3]
    seqs = Dataset.from_generator(lambda: (np.arange(1, n + 1, dtype=np.int64) for n in lengths),
                                  output_signature=ml.TensorSpec([None], ml.int64))
    buckets = seqs.bucket_by_sequence_length(lambda x: ml.shape(x)[0], [3, 6], [2, 2, 2])
    assert items(buckets)[:3] == [[[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]], [[1, 0], [1, 2]],
                                  [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 0]]]
    assert buckets.element_spec == md.TensorSpec((None, None), np.int64)
    padded = seqs.bucket_by_sequence_length(lambda x: ml.shape(x)[0], [4, 9], [3, 2, 2], pad_to_bucket_boundary=True)
    assert items(padded)[0] == [[1, 2, 3], [1, 0, 0], [1, 2, 0]]
    with pytest.raises(ValueError, match=re.escape("`len(bucket_batch_sizes)=1` and `len(bucket_boundaries)=1`")):
        seqs.bucket_by_sequence_length(lambda x: ml.shape(x)[0], [4], [3])
