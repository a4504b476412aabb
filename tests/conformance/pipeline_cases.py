"""Input-pipeline conformance cases: what a ``tf.data``-style pipeline yields, iterated several times in one
process (no strategy). Each case is a JSON spec (a source and a list of transformations) built the same way on
``tf.data`` and on ``mirrorlab.tf.data``, so the recorded TF result (``golden/pipelines.json``, written by
record_pipeline_golden.py) is compared with mirrorlab's without TensorFlow.

The cases are drawn at random from a fixed seed (``pipeline_specs``): seeded shuffles (both reshuffle modes),
repeat (finite, forever under ``take``), batch (with and without ``drop_remainder``), unbatch, map, filter, take,
skip, shard, cache, prefetch, the optimization options that change how many seeds a shuffle draws, and a final
zip, concatenate (with a second copy of the pipeline) or enumerate. A case records the cardinality and every element of each of its iterations, or the error that ended one.

A second family (``edge_###``, ``edge_specs``, its own seed) adds ``range(start, stop, step)`` and ``from_tensors``
sources, padded_batch, take_while, scan, flat_map and interleave, and arguments TF refuses or treats specially
(``batch(0)``, ``shard(2, 2)``, a zero step, ``take(-5)``, ``repeat(-2)``), whose error classes are compared.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from .adapters import as_numpy

__all__ = ["pipeline_specs", "edge_specs", "all_specs", "build", "run_spec", "SPEC_SEED", "SPEC_COUNT"]

SPEC_SEED = 20261123
SPEC_COUNT = 400
EDGE_SEED = 20261124
EDGE_COUNT = 200
MAX_ELEMENTS = 200  # a safety stop per iteration (a forever repeat is always under a take)

Spec = dict[str, Any]


def _transformation(rnd: random.Random, batched: bool) -> list[Any]:
    """One random transformation (element-wise ones only while elements are scalars)."""
    choices = ["shuffle", "shuffle", "shuffle", "repeat", "take", "skip", "shard", "cache", "prefetch", "map"]
    choices += ["unbatch"] if batched else ["batch", "batch", "filter"]
    kind = rnd.choice(choices)
    if kind == "shuffle":
        return ["shuffle", rnd.randint(1, 12), rnd.choice([0, 1, 7, 42, 12345, 2**31 + 5, -3]),
                rnd.random() < 0.7]
    if kind == "repeat":
        return ["repeat", rnd.choice([0, 1, 2, 3, None])]
    if kind in ("take", "skip"):
        return [kind, rnd.choice([-1, 0, 1, 3, 5, 9])]
    if kind == "shard":
        shards = rnd.randint(1, 3)
        return ["shard", shards, rnd.randrange(shards)]
    if kind == "batch":
        return ["batch", rnd.randint(1, 5), rnd.random() < 0.3]
    return [kind]


def pipeline_specs(count: int = SPEC_COUNT, seed: int = SPEC_SEED) -> dict[str, Spec]:
    """The cases by name: ``{"source": [kind, n], "ops": [...], "options": {...}, "iterations": k}``."""
    rnd = random.Random(seed)
    specs = {}
    for i in range(count):
        ops: list[list[Any]] = []
        batched = False
        for _ in range(rnd.randint(1, 5)):
            op = _transformation(rnd, batched)
            batched = (batched or op[0] == "batch") and op[0] != "unbatch"
            ops.append(op)
        if any(op == ["repeat", None] for op in ops):
            ops.append(["take", rnd.randint(1, 40)])
        if rnd.random() < 0.3:  # combine with a second copy of the same pipeline (its own shuffles and seeds)
            ops.append(rnd.choice([["enumerate", rnd.choice([0, 5])], ["zip_self"], ["concatenate_self"]]))
        options = {}
        if rnd.random() < 0.3:
            name = rnd.choice(["shuffle_and_repeat_fusion", "noop_elimination", "apply_default_optimizations"])
            options[name] = rnd.random() < 0.5
        specs[f"pipeline_{i:03d}"] = {"source": [rnd.choice(["range", "slices"]), rnd.randint(0, 12)], "ops": ops,
                                      "options": options, "iterations": rnd.randint(1, 3)}
    return specs


def _edge_transformation(rnd: random.Random, batched: bool) -> list[Any]:
    """One random transformation of the second family (``batched``: elements are vectors)."""
    choices = ["padded_batch", "shuffle", "repeat", "take", "skip", "shard", "cache", "scan", "flat_map"]
    choices += ["unbatch", "flat_map"] if batched else ["batch", "take_while", "interleave", "map"]
    kind = rnd.choice(choices)
    if kind == "padded_batch":
        return ["padded_batch", rnd.choice([0, 1, 2, 3]), rnd.random() < 0.3, rnd.choice([None, 2, 6])]
    if kind == "batch":
        return ["batch", rnd.choice([0, 1, 2, 3, 4]), rnd.random() < 0.3]
    if kind == "shuffle":
        return ["shuffle", rnd.randint(1, 6), rnd.choice([3, 99]), rnd.random() < 0.5]
    if kind == "repeat":
        return ["repeat", rnd.choice([0, 2, -2, None])]
    if kind in ("take", "skip"):
        return [kind, rnd.choice([-5, -1, 0, 2, 4])]
    if kind == "shard":
        shards = rnd.randint(1, 3)
        return ["shard", shards, rnd.choice([0, shards - 1, shards])]
    if kind == "take_while":
        return ["take_while", rnd.randint(0, 8)]
    if kind == "interleave":
        return ["interleave", rnd.randint(1, 3), rnd.randint(1, 3), rnd.randint(1, 3)]
    return [kind]


def edge_specs(count: int = EDGE_COUNT, seed: int = EDGE_SEED) -> dict[str, Spec]:
    """The second family by name, in ``pipeline_specs``' format (padded batches keep elements vectors)."""
    rnd = random.Random(seed)
    specs = {}
    for i in range(count):
        source = rnd.choice([["range3", rnd.randint(-3, 4), rnd.randint(-2, 12), rnd.choice([1, 2, 3, -1, -2, 0])],
                             ["tensors", rnd.randint(0, 6)], ["range", rnd.randint(0, 10)]])
        batched = source[0] == "tensors"
        ops: list[list[Any]] = []
        for _ in range(rnd.randint(1, 4)):
            op = _edge_transformation(rnd, batched)
            batched = (batched or op[0] in ("batch", "padded_batch")) and op[0] not in ("unbatch", "flat_map")
            ops.append(op)
        if any(op[0] == "repeat" and (op[1] is None or op[1] < 0) for op in ops):
            ops.append(["take", rnd.randint(1, 30)])
        specs[f"edge_{i:03d}"] = {"source": source, "ops": ops, "options": {}, "iterations": rnd.randint(1, 2)}
    return specs


def _options(data: Any, **fields: Any) -> Any:
    """``range(3)`` with Options whose fields are set as given (TF refuses unknown names and other types)."""
    options = data.Options()
    for name, value in fields.items():
        target = options
        *path, last = name.split(".")
        for part in path:
            target = getattr(target, part)
        setattr(target, last, value)
    return data.Dataset.range(3).with_options(options)


def _strings(data: Any) -> Any:
    return data.Dataset.from_tensor_slices(["x", "yy", "zzz", "x"])


# Hand-written cases (``fixed_<name>``): datasets of the API the random families do not reach, and TF's errors.
FIXED: dict[str, Callable[[Any], Any]] = {
    "window": lambda data: data.Dataset.range(7).window(3, shift=2).flat_map(lambda w: w.batch(3)),
    "window_drop_stride": lambda data: data.Dataset.range(10).window(3, shift=1, stride=2, drop_remainder=True)
    .flat_map(lambda w: w.batch(3)),
    "window_tuple": lambda data: data.Dataset.zip((data.Dataset.range(5), data.Dataset.range(10, 15))).window(2)
    .flat_map(lambda a, b: data.Dataset.zip((a.batch(2), b.batch(2)))),
    "window_cardinality": lambda data: data.Dataset.from_tensors(np.array(
        [int(data.Dataset.range(n).window(3, shift=s, drop_remainder=d).cardinality())
         for n in (0, 2, 5, 7) for s in (1, 2, 4) for d in (False, True)], np.int64)),
    "unique_ints": lambda data: data.Dataset.from_tensor_slices(np.array([3, 1, 3, 2, 1], np.int64)).unique(),
    "unique_strings": lambda data: _strings(data).unique(),
    "unique_floats": lambda data: data.Dataset.from_tensor_slices([1.0, 2.0]).unique(),
    "counter": lambda data: data.Dataset.counter(5, -2).take(4),
    "choose": lambda data: data.Dataset.choose_from_datasets(
        [data.Dataset.range(3), data.Dataset.range(10, 13)],
        data.Dataset.from_tensor_slices(np.array([0, 1, 1, 0, 0, 0, 1], np.int64))),
    "choose_no_stop": lambda data: data.Dataset.choose_from_datasets(
        [data.Dataset.range(3), data.Dataset.range(10, 13)],
        data.Dataset.from_tensor_slices(np.array([0, 1, 1, 0, 0, 0, 1, 1], np.int64)), stop_on_empty_dataset=False),
    "get_single_element": lambda data: data.Dataset.from_tensors(
        data.Dataset.range(4, 5).map(lambda x: x * 2).get_single_element()),
    "get_single_element_empty": lambda data: data.Dataset.range(0).get_single_element(),
    "get_single_element_two": lambda data: data.Dataset.range(2).get_single_element(),
    "reduce": lambda data: data.Dataset.from_tensors(data.Dataset.range(6).reduce(np.int64(0), lambda s, x: s + x)),
    "reduce_structure": lambda data: data.Dataset.from_tensors(data.Dataset.range(1, 5).reduce(
        (np.int64(0), {"p": np.int64(1)}), lambda s, x: (s[0] + x, {"p": s[1]["p"] * x}))),
    "reduce_empty": lambda data: data.Dataset.from_tensors(data.Dataset.range(0).reduce(np.int64(7),
                                                                                         lambda s, x: s + x)),
    "reduce_python_int_state": lambda data: data.Dataset.range(3).reduce(0, lambda s, x: s + x),
    "scan_zip": lambda data: data.Dataset.zip((data.Dataset.range(4), data.Dataset.range(4))).scan(
        np.int64(0), lambda s, x: (s + x[0], x[1] * s)),
    "take_while_zip": lambda data: data.Dataset.zip((data.Dataset.range(5), data.Dataset.range(5))).take_while(
        lambda a, b: a + b < 5),
    "padded_dict": lambda data: data.Dataset.zip({"v": data.Dataset.range(7).batch(2), "s": data.Dataset.range(4)})
    .padded_batch(3, padded_shapes={"v": [3], "s": []}, padding_values={"v": np.int64(-1), "s": np.int64(0)}),
    "padded_strings": lambda data: _strings(data).batch(3).padded_batch(2),
    "padded_wrong_value_dtype": lambda data: data.Dataset.range(5).batch(2).padded_batch(2, padding_values=-1),
    "padded_too_small_shape": lambda data: data.Dataset.range(5).batch(2, drop_remainder=True).padded_batch(
        2, padded_shapes=[1]),
    "padded_wrong_rank": lambda data: data.Dataset.range(5).batch(2).padded_batch(2, padded_shapes=[2, 2]),
    "padded_runtime_too_small": lambda data: data.Dataset.range(5).batch(3).padded_batch(2, padded_shapes=[2]),
    "strings_batch_unbatch": lambda data: _strings(data).batch(3).unbatch(),
    "strings_shuffle": lambda data: _strings(data).shuffle(4, seed=5),
    "strings_from_tensors": lambda data: data.Dataset.from_tensors(["ab", "c"]).repeat(2),
    "strings_map": lambda data: data.Dataset.range(2).map(lambda x: "const"),
    "map_list": lambda data: data.Dataset.range(3).map(lambda x: [x, x * 2]),
    "map_dict_list": lambda data: data.Dataset.range(3).map(lambda x: {"pair": [x, x]}),
    "from_tensor_slices_dict_lists": lambda data: data.Dataset.from_tensor_slices({"a": [1, 2], "b": [[1.0], [2.0]]}),
    "from_tensor_slices_numpy_list": lambda data: data.Dataset.from_tensor_slices([np.arange(2), np.arange(2, 4)]),
    "from_tensor_slices_float64": lambda data: data.Dataset.from_tensor_slices(np.array([0.5, 1.5])),
    "from_tensor_slices_scalar": lambda data: data.Dataset.from_tensor_slices(3),
    "from_tensor_slices_uneven": lambda data: data.Dataset.from_tensor_slices({"a": [1, 2], "b": [1]}),
    "range_output_type": lambda data: data.Dataset.range(1, 7, 2, output_type=np.int32),
    "range_float_type": lambda data: data.Dataset.range(3, output_type=np.float32),
    "range_float_arg": lambda data: data.Dataset.range(2.5),
    "range_no_args": lambda data: data.Dataset.range(),
    "range_four_args": lambda data: data.Dataset.range(1, 2, 3, 4),
    "range_zero_step": lambda data: data.Dataset.range(0, 5, 0),
    "batch_float_size": lambda data: data.Dataset.range(3).batch(2.0),
    "take_negative": lambda data: data.Dataset.range(3).take(-5),
    "take_negative_of_infinite": lambda data: data.Dataset.range(3).repeat().take(-5).take(7),
    "unbatch_scalars": lambda data: data.Dataset.range(3).unbatch(),
    "unbatch_uneven": lambda data: data.Dataset.zip((data.Dataset.range(4).batch(2), data.Dataset.range(6).batch(3)))
    .unbatch(),
    "filter_int_predicate": lambda data: data.Dataset.range(3).filter(lambda x: x),
    "filter_vector_predicate": lambda data: data.Dataset.range(4).batch(2).filter(lambda x: x > 0),
    "filter_numpy_bool": lambda data: data.Dataset.range(4).filter(lambda x: np.bool_(True)),
    "take_while_int_predicate": lambda data: data.Dataset.range(3).take_while(lambda x: x),
    "len": lambda data: data.Dataset.from_tensors(np.int64(len(data.Dataset.range(2, 9, 3)))),
    "len_infinite": lambda data: data.Dataset.from_tensors(len(data.Dataset.range(2).repeat())),
    "len_unknown": lambda data: data.Dataset.from_tensors(len(data.Dataset.range(2).filter(lambda x: x > 0))),
    "options_unknown_name": lambda data: _options(data, not_an_option=True),
    "options_wrong_type": lambda data: _options(data, deterministic=3),
    "options_policy_int": lambda data: _options(data, **{"experimental_distribute.auto_shard_policy": 1}),
    "options_optimization": lambda data: _options(data, **{"experimental_optimization.map_fusion": True,
                                                           "deterministic": False, "threading.private_threadpool_size": 2}),
    "list_files_no_match": lambda data: data.Dataset.list_files("/nonexistent-mirrorlab-dir/*.txt"),
    "shuffle_zero_buffer": lambda data: data.Dataset.range(3).shuffle(0),
    "shard_index_too_large": lambda data: data.Dataset.range(3).shard(2, 2),
    "apply": lambda data: data.Dataset.range(4).apply(lambda ds: ds.map(lambda x: x + 1).batch(3)),
    "unbatch_empty_vector": lambda data: data.Dataset.from_tensors(np.arange(0)).unbatch(),
    "fused_repeat0_spec": lambda data: data.Dataset.from_tensors(np.arange(2)).shuffle(3, seed=3).repeat(0).scan(
        np.int64(0), lambda state, x: (state + 1, x)),
    "padded_shape_checked_before_size": lambda data: data.Dataset.from_tensors(np.arange(6)).padded_batch(
        0, padded_shapes=[2]),
    "shuffle_repeat_negative": lambda data: data.Dataset.range(5).shuffle(3, seed=7).repeat(-2).take(6),
    "repeat_negative": lambda data: data.Dataset.range(3).repeat(-2).take(7),
    "take_negative_cardinalities": lambda data: data.Dataset.from_tensors(np.array(
        [int(ds.cardinality()) for ds in _after_take_negative(data)], np.int64)),
    "map_identity_fused": lambda data: data.Dataset.range(5).shuffle(5, seed=3).map(lambda x: x).repeat(2),
    "map_identity_tuple_fused": lambda data: data.Dataset.zip((data.Dataset.range(4), data.Dataset.range(4)))
    .shuffle(4, seed=3).map(lambda a, b: (a, b)).repeat(2),
    "map_swap_not_fused": lambda data: data.Dataset.zip((data.Dataset.range(4), data.Dataset.range(4)))
    .shuffle(4, seed=3).map(lambda a, b: (b, a)).repeat(2),
    "rebatch_static_drop": lambda data: data.Dataset.range(9).batch(4).rebatch(3, drop_remainder=True),
    "rebatch_static_divisible": lambda data: data.Dataset.range(12).batch(6, drop_remainder=True).rebatch(3),
    "rebatch_static_list": lambda data: data.Dataset.range(8).batch(4, drop_remainder=True).rebatch([2, 2]),
    "rebatch_not_divisible": lambda data: data.Dataset.range(8).batch(4, drop_remainder=True).rebatch(3),
    "rebatch_zero_static": lambda data: data.Dataset.range(8).batch(4, drop_remainder=True).rebatch(0).take(3),
    "rebatch_one_static_component": lambda data: data.Dataset.zip((data.Dataset.range(8).batch(4),
                                                                   data.Dataset.range(12).batch(6, True))).rebatch(3),
    "rebatch_scalars": lambda data: data.Dataset.range(5).rebatch(2),
    "rebatch_float_size": lambda data: data.Dataset.range(5).batch(2).rebatch(2.0),
    "rebatch_other_inner_shapes": lambda data: data.Dataset.range(12).batch(5).batch(1).rebatch(4),
    "rebatch_inner_shapes_apart": lambda data: data.Dataset.range(13).batch(4).batch(1).rebatch(3),
    "map_batch_dropped_mismatch": lambda data: data.Dataset.range(8).batch(7).map(lambda x: x * 2).batch(
        3, drop_remainder=True),
    "map_batch_unfused": lambda data: _unfused(data, data.Dataset.range(8).batch(7).map(lambda x: x * 2).batch(
        3, drop_remainder=True)),
    "map_identity_batch": lambda data: data.Dataset.range(8).batch(7).map(lambda x: x).batch(3, drop_remainder=True),
    "choose_forever_no_stop": lambda data: data.Dataset.choose_from_datasets(
        [data.Dataset.range(2), data.Dataset.range(10, 11)], data.Dataset.range(2).repeat(), stop_on_empty_dataset=False),
    "choose_mixed_shapes": lambda data: data.Dataset.choose_from_datasets(
        [data.Dataset.from_tensors(np.zeros(2)), data.Dataset.from_tensors(np.ones(3))],
        data.Dataset.from_tensor_slices(np.array([1, 0], np.int64))),
    "choose_incompatible_dtypes": lambda data: data.Dataset.choose_from_datasets(
        [data.Dataset.range(2), data.Dataset.from_tensors(np.zeros(3))],
        data.Dataset.from_tensor_slices(np.array([1, 0], np.int64))),
    "choose_int32_choices": lambda data: data.Dataset.choose_from_datasets(
        [data.Dataset.range(2)], data.Dataset.from_tensor_slices(np.array([0], np.int32))),
    "random": lambda data: data.Dataset.random(seed=4).take(5),
    "random_rerandomized": lambda data: data.Dataset.random(seed=4, rerandomize_each_iteration=True).take(3),
    "random_repeated": lambda data: data.Dataset.random(seed=9, rerandomize_each_iteration=True).take(2).repeat(3),
    "random_batched": lambda data: data.Dataset.random(seed=2**40).batch(3).take(2),
    "sample_uniform": lambda data: data.Dataset.sample_from_datasets(_sampled(data, 20, 20), seed=3),
    "sample_weights": lambda data: data.Dataset.sample_from_datasets(
        _sampled(data, 20, 20, 3), weights=[0.2, 0.5, 0.3], seed=11),
    "sample_weights_float64": lambda data: data.Dataset.sample_from_datasets(
        _sampled(data, 20, 20), weights=np.array([0.9, 0.1]), seed=2),
    "sample_zero_weight": lambda data: data.Dataset.sample_from_datasets(
        _sampled(data, 20, 20, 3), weights=[0.5, 0.0, 0.5], seed=5),
    "sample_all_zero_weights": lambda data: data.Dataset.sample_from_datasets(
        _sampled(data, 20, 20), weights=[0.0, 0.0], seed=5),
    "sample_stop_on_empty": lambda data: data.Dataset.sample_from_datasets(
        _sampled(data, 20, 3), seed=8, stop_on_empty_dataset=True),
    "sample_int_weights": lambda data: data.Dataset.sample_from_datasets(_sampled(data, 2, 2), weights=[1, 2]),
    "sample_weights_length": lambda data: data.Dataset.sample_from_datasets(_sampled(data, 2, 2), weights=[1.0]),
    "sample_no_datasets": lambda data: data.Dataset.sample_from_datasets([]),
    "sample_one_dataset": lambda data: data.Dataset.sample_from_datasets(_sampled(data, 3), seed=1),
    "sample_weights_dataset": lambda data: data.Dataset.sample_from_datasets(
        _sampled(data, 20, 20), weights=data.Dataset.from_tensor_slices(
            np.array([[0.3, 0.7], [0.9, 0.1], [0.0, 1.0]], np.float32)).repeat(), seed=9),
    "sample_rerandomized": lambda data: data.Dataset.sample_from_datasets(
        _sampled(data, 4, 4), seed=6, rerandomize_each_iteration=True),
    "sample_batched_mixed_shapes": lambda data: data.Dataset.sample_from_datasets(
        [data.Dataset.range(7).batch(2), data.Dataset.range(50, 53).batch(3)], weights=[0.25, 0.75], seed=21),
    "sample_structures": lambda data: data.Dataset.sample_from_datasets(
        [data.Dataset.zip({"x": data.Dataset.range(4), "y": data.Dataset.range(4).map(lambda v: v * 2)}),
         data.Dataset.zip({"x": data.Dataset.range(9, 12), "y": data.Dataset.range(3)})], seed=13),
    "gbw_basic": lambda data: data.Dataset.range(10).group_by_window(lambda x: x % 3, lambda k, w: w.batch(4),
                                                                     window_size=2),
    "gbw_flush_in_key_order": lambda data: data.Dataset.from_tensor_slices(np.array([5, 2, 9, 1, 7, 3, -4], np.int64))
    .group_by_window(lambda x: x % 4 - 1, lambda k, w: w.batch(10), window_size=5),
    "gbw_window_size_func": lambda data: data.Dataset.range(12).group_by_window(
        lambda x: x % 3, lambda k, w: w.batch(9), window_size_func=lambda k: k + 1),
    "gbw_key_in_output": lambda data: data.Dataset.range(7).group_by_window(
        lambda x: x % 2, lambda k, w: w.batch(3).map(lambda b: (k, b)), window_size=3),
    "gbw_tuple_elements": lambda data: data.Dataset.zip((data.Dataset.range(6), data.Dataset.range(10, 16)))
    .group_by_window(lambda a, b: a % 2, lambda k, w: w.batch(2), window_size=2),
    "gbw_zero_window": lambda data: data.Dataset.range(6).group_by_window(lambda x: x % 2, lambda k, w: w,
                                                                          window_size=0),
    "gbw_both_sizes": lambda data: data.Dataset.range(6).group_by_window(
        lambda x: x, lambda k, w: w, window_size=2, window_size_func=lambda k: np.int64(2)),
    "gbw_reduce_not_dataset": lambda data: data.Dataset.range(6).group_by_window(lambda x: x % 2, lambda k, w: 3,
                                                                                 window_size=2),
    "bucket_basic": lambda data: _sequences(data).bucket_by_sequence_length(lambda n, s: n, [3, 6], [2, 2, 2]),
    "bucket_pad_to_boundary": lambda data: _sequences(data).bucket_by_sequence_length(
        lambda n, s: n, [4, 9], [3, 2, 2], pad_to_bucket_boundary=True),
    "bucket_over_last_boundary": lambda data: _sequences(data).bucket_by_sequence_length(
        lambda n, s: n, [4, 6], [3, 2, 2], pad_to_bucket_boundary=True),
    "bucket_padded_shapes": lambda data: _sequences(data).bucket_by_sequence_length(
        lambda n, s: n, [4], [3, 2], padded_shapes=([], [10]), padding_values=(np.int32(0), np.int64(-1))),
    "bucket_drop_remainder": lambda data: _sequences(data).bucket_by_sequence_length(
        lambda n, s: n, [4], [3, 2], drop_remainder=True),
    "bucket_no_padding": lambda data: data.Dataset.from_tensor_slices(np.arange(10, dtype=np.int32))
    .bucket_by_sequence_length(lambda x: x, [3, 6], [2, 3, 4], no_padding=True),
    "bucket_int64_lengths": lambda data: data.Dataset.range(10).bucket_by_sequence_length(
        lambda x: x, [3, 6], [2, 3, 4], no_padding=True),
    "bucket_batch_sizes_length": lambda data: _sequences(data).bucket_by_sequence_length(lambda n, s: n, [4], [3]),
    "concatenate_other_rank": lambda data: data.Dataset.from_tensors(np.array([1], np.int64)).concatenate(
        data.Dataset.from_tensors(np.array([[2, 3]], np.int64))),
    "choose_other_rank": lambda data: data.Dataset.choose_from_datasets(
        [data.Dataset.from_tensors(np.zeros(2)), data.Dataset.from_tensors(np.ones((1, 2)))],
        data.Dataset.from_tensor_slices(np.array([1, 0], np.int64))),
    # tf.data.experimental's functional forms, assert_cardinality and from_list
    "exp_assert_ok": lambda data: data.Dataset.range(3).apply(data.experimental.assert_cardinality(3)),
    "exp_assert_too_few": lambda data: data.Dataset.range(3).apply(data.experimental.assert_cardinality(5)),
    "exp_assert_too_many": lambda data: data.Dataset.range(4).apply(data.experimental.assert_cardinality(2)),
    "exp_assert_one": lambda data: data.Dataset.range(0).apply(data.experimental.assert_cardinality(1)),
    "exp_assert_infinite": lambda data: data.Dataset.range(4).apply(
        data.experimental.assert_cardinality(data.experimental.INFINITE_CARDINALITY)),
    "exp_assert_unknown": lambda data: data.Dataset.range(4).apply(
        data.experimental.assert_cardinality(data.experimental.UNKNOWN_CARDINALITY)),
    "exp_assert_after_filter_batch": lambda data: data.Dataset.range(10).filter(lambda x: x % 2 == 0).apply(
        data.experimental.assert_cardinality(5)).batch(2),
    "exp_assert_then_take": lambda data: data.Dataset.range(4).apply(data.experimental.assert_cardinality(2)).take(2),
    "exp_assert_float": lambda data: data.Dataset.range(4).apply(data.experimental.assert_cardinality(2.5)),
    "exp_cardinality": lambda data: data.Dataset.from_tensors(data.experimental.cardinality(data.Dataset.range(5))),
    "exp_shuffle_and_repeat": lambda data: data.Dataset.range(4).apply(
        data.experimental.shuffle_and_repeat(3, count=2, seed=5)),
    "exp_shuffle_and_repeat_forever": lambda data: data.Dataset.range(4).apply(
        data.experimental.shuffle_and_repeat(4, seed=9)).take(10),
    "exp_map_and_batch": lambda data: data.Dataset.range(7).apply(data.experimental.map_and_batch(lambda x: x * 2, 3)),
    "exp_map_and_batch_drop": lambda data: data.Dataset.range(7).apply(
        data.experimental.map_and_batch(lambda x: x * 2, 3, drop_remainder=True)),
    "exp_map_and_batch_both": lambda data: data.Dataset.range(7).apply(data.experimental.map_and_batch(
        lambda x: x, 3, num_parallel_batches=1, num_parallel_calls=2)),
    "exp_parallel_interleave": lambda data: data.Dataset.range(4).apply(data.experimental.parallel_interleave(
        lambda x: data.Dataset.range(x + 1), cycle_length=2, block_length=2)),
    "exp_enumerate": lambda data: data.Dataset.range(3).apply(data.experimental.enumerate_dataset(5)),
    "exp_unbatch_unique": lambda data: data.Dataset.from_tensor_slices(np.array([1, 2, 1, 3, 2, 2], np.int64)).batch(
        4).apply(data.experimental.unbatch()).apply(data.experimental.unique()),
    "exp_take_while_scan": lambda data: data.Dataset.range(6).apply(data.experimental.scan(
        np.int64(0), lambda s, x: (s + x, s))).apply(data.experimental.take_while(lambda x: x < 7)),
    "exp_counter": lambda data: data.experimental.Counter(3, 2).take(3),
    "exp_counter_int32": lambda data: data.experimental.Counter(3, -2, dtype=np.int32).take(3),
    "exp_random": lambda data: data.experimental.RandomDataset(seed=4).take(2),
    "exp_choose_sample": lambda data: data.experimental.choose_from_datasets(
        [data.experimental.sample_from_datasets(_sampled(data, 4, 4), seed=3), data.Dataset.range(50, 53)],
        data.Dataset.from_tensor_slices(np.array([0, 1, 0, 0, 1], np.int64))),
    "exp_group_by_window": lambda data: data.Dataset.range(7).apply(data.experimental.group_by_window(
        lambda x: x % 2, lambda k, w: w.batch(3), window_size=3)),
    "exp_bucket": lambda data: _sequences(data).apply(data.experimental.bucket_by_sequence_length(
        lambda n, s: n, [3, 6], [2, 2, 2])),
    "exp_single_element": lambda data: data.Dataset.from_tensors(
        data.experimental.get_single_element(data.Dataset.range(4, 5))),
    "exp_from_list": lambda data: data.experimental.from_list([1, 2, 3]),
    "exp_from_list_structures": lambda data: data.experimental.from_list([(1, "a", {"v": 1.5}), (2, "b", {"v": 2.5})]),
    "exp_from_list_ragged": lambda data: data.experimental.from_list([[1], [2, 3], [4, 5, 6]]).padded_batch(2),
    "exp_from_list_batched": lambda data: data.experimental.from_list([np.arange(2), np.arange(2, 4)]).batch(2),
    "exp_from_list_empty": lambda data: data.experimental.from_list([]),
    "exp_from_list_mixed_dtypes": lambda data: data.experimental.from_list([1, "a"]),
    "exp_from_list_mixed_ranks": lambda data: data.experimental.from_list([1, [2]]),
    "exp_from_list_cardinality": lambda data: data.Dataset.from_tensors(
        data.experimental.from_list([[1], [2, 3]]).cardinality()),
    # ignore_errors: which ops go on after an element fails, and how (elements 3 and 8 of _failing fail)
    "int_division_by_zero": lambda data: data.Dataset.range(5).map(lambda x: 6 // (x - 2)),
    "ignore_map": lambda data: _failing(data).ignore_errors(),
    "ignore_logged": lambda data: _failing(data).ignore_errors(log_warning=True),
    "ignore_experimental": lambda data: _failing(data).apply(data.experimental.ignore_errors()),
    "ignore_cardinality": lambda data: data.Dataset.from_tensors(data.Dataset.range(4).ignore_errors().cardinality()),
    "ignore_nothing_fails": lambda data: data.Dataset.range(4).ignore_errors().batch(3),
    "ignore_then_map_fails": lambda data: _failing(data).ignore_errors().map(lambda x: 100 // (x + 4)).ignore_errors(),
    "ignore_then_batch": lambda data: _failing(data).ignore_errors().batch(4),
    "ignore_then_fails": lambda data: _failing(data).ignore_errors().map(lambda x: 100 // (x + 4)),
    **{f"ignore_{name}": (lambda make: lambda data: make(data, _failing(data)).ignore_errors())(make)
       for name, make in {
           "take": lambda data, m: m.take(5),
           "skip_past_failure": lambda data, m: m.skip(4),
           "skip_before_failure": lambda data, m: m.skip(2),
           "skip_all": lambda data, m: m.skip(-1),
           "batch_fused": lambda data, m: m.batch(3),
           "batch4_fused": lambda data, m: m.batch(4),
           "batch_unfused": lambda data, m: _unfused(data, m.batch(3)),
           "batch4_unfused": lambda data, m: _unfused(data, m.batch(4)),
           "batch_drop_fused": lambda data, m: m.batch(5, drop_remainder=True),
           "batch_drop_unfused": lambda data, m: _unfused(data, m.batch(5, drop_remainder=True)),
           "batch_prefetch": lambda data, m: m.prefetch(2).batch(3),
           "padded_batch": lambda data, m: m.padded_batch(3),
           "filter": lambda data, m: m.filter(lambda x: x > 1),
           "filter_fails": lambda data, m: data.Dataset.range(8).filter(lambda x: 100 // (x - 5) > -100),
           "shuffle_whole": lambda data, m: m.shuffle(100, seed=1),
           "shuffle_small_buffer": lambda data, m: m.shuffle(3, seed=7),
           "shuffle_repeat": lambda data, m: m.shuffle(4, seed=3).repeat(2),
           "zip": lambda data, m: data.Dataset.zip((m, data.Dataset.range(12))),
           "zip_second": lambda data, m: data.Dataset.zip((data.Dataset.range(20), m)),
           "enumerate": lambda data, m: m.enumerate(),
           "repeat": lambda data, m: m.repeat(2),
           "concatenate": lambda data, m: m.take(5).concatenate(m.skip(5)),
           "flat_map": lambda data, m: data.Dataset.range(3).flat_map(lambda x: m.skip(4 * x).take(4)),
           "flat_map_fn_fails": lambda data, m: data.Dataset.range(4).flat_map(
               lambda x: data.Dataset.range(100 // (x - 1), 100 // (x - 1) + 2)),
           "interleave": lambda data, m: data.Dataset.range(3).interleave(lambda x: m.skip(4 * x).take(4),
                                                                          cycle_length=2),
           "interleave_blocks": lambda data, m: data.Dataset.range(3).interleave(lambda x: m.skip(4 * x).take(4),
                                                                                 cycle_length=2, block_length=3),
           "window": lambda data, m: m.window(3).flat_map(lambda w: w.batch(3)),
           "window_shift": lambda data, m: m.window(3, shift=2).flat_map(lambda w: w.batch(3)),
           "cache_repeat": lambda data, m: m.cache().repeat(2),
           "scan": lambda data, m: m.scan(np.int64(0), lambda s, x: (s + x, s + x)),
           "shard_2_1": lambda data, m: m.shard(2, 1),
           "shard_2_0": lambda data, m: m.shard(2, 0),
           "shard_3_1": lambda data, m: m.shard(3, 1),
           "unbatch_fused": lambda data, m: m.batch(3).unbatch(),
           "unbatch_unfused": lambda data, m: _unfused(data, m.batch(3).unbatch()),
           "rebatch": lambda data, m: m.batch(4).rebatch(2),
           "rebatch_unfused": lambda data, m: _unfused(data, m.batch(4).rebatch(3)),
           "map_after": lambda data, m: m.map(lambda x: x * 2),
           "batch_then_map": lambda data, m: data.Dataset.range(12).batch(3).map(lambda x: 100 // ((x - 3) * (x - 8))),
           "take_while": lambda data, m: m.take_while(lambda x: x != 14),
           "unique": lambda data, m: m.map(lambda x: x % 4).unique(),
           "group_by_window": lambda data, m: m.group_by_window(lambda x: x % 2, lambda k, w: w.batch(2),
                                                                window_size=2),
           "choose": lambda data, m: data.Dataset.choose_from_datasets(
               [m, data.Dataset.range(12)], data.Dataset.from_tensor_slices(
                   np.array([0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0], np.int64))),
       }.items()},
    # snapshot: the first complete pass is written, the next ones read it (a reshuffling shuffle repeats its order)
    "snapshot_reshuffle": lambda data: data.Dataset.range(8).shuffle(8, seed=1).snapshot(_new_dir()),
    "snapshot_shards_flat_map": lambda data: data.Dataset.range(10).snapshot(
        _new_dir(), shard_func=lambda x: x % 3, reader_func=lambda shards: shards.flat_map(lambda shard: shard)),
    "snapshot_shards_interleave": lambda data: data.Dataset.range(10).shuffle(10, seed=4).snapshot(
        _new_dir(), shard_func=lambda x: x % 3,
        reader_func=lambda shards: shards.interleave(lambda shard: shard, cycle_length=2)),
    "snapshot_structures": lambda data: data.Dataset.from_tensor_slices(
        ({"a": np.array([[1, 2], [3, 4], [5, 6]], np.int32)}, ["x", "yy", ""])).snapshot(_new_dir()),
    "snapshot_batched": lambda data: data.Dataset.range(7).batch(3).snapshot(_new_dir(), compression="GZIP"),
    "snapshot_experimental": lambda data: data.Dataset.range(6).shuffle(6, seed=9).apply(
        data.experimental.snapshot(_new_dir())),
    "snapshot_empty": lambda data: data.Dataset.range(0).snapshot(_new_dir()),
    "snapshot_cardinality": lambda data: data.Dataset.from_tensors(
        data.Dataset.range(10).filter(lambda x: x > 3).snapshot(_new_dir()).cardinality()),
    "snapshot_shard_func_bool": lambda data: data.Dataset.range(3).snapshot(_new_dir(), shard_func=lambda x: x < 2),
    "snapshot_then_repeat": lambda data: data.Dataset.range(4).shuffle(4, seed=5).snapshot(_new_dir()).repeat(3),
    "snapshot_ignore_errors": lambda data: _failing(data).snapshot(_new_dir()).ignore_errors(),
    "snapshot_errors": lambda data: _failing(data).snapshot(_new_dir()),
    "snapshot_other_pipeline_same_path": lambda data: _two_snapshots(data),
    # errors an op raises itself, after which TF's iterator goes on (so an ignore_errors skips just that element)
    "unbatch_sizes": lambda data: _unequal_rows(data).unbatch(),
    "ignore_unbatch_sizes": lambda data: _unequal_rows(data).unbatch().ignore_errors(),
    "rebatch_unequal_rows": lambda data: _unequal_rows(data).rebatch(1),
    "ignore_rebatch_unequal_rows": lambda data: _unequal_rows(data).rebatch(1).ignore_errors(),
    "ignore_rebatch3_unequal_rows": lambda data: _unequal_rows(data).rebatch(3).ignore_errors(),
    "choose_out_of_range": lambda data: _choose_out_of_range(data),
    "ignore_choose_out_of_range": lambda data: _choose_out_of_range(data).ignore_errors(),
    # from_generator with declared shapes: NumPy's casts, and TF's errors for what they cannot convert
    "generator_casts_int64": lambda data: _generated(data, [2.5, 300, True, "5", b"7", np.float32(3.7), 2**40],
                                                     np.int64),
    "generator_casts_uint8": lambda data: _generated(data, [2.5, 300, True, "5", np.int64(2**40)], np.uint8),
    "generator_casts_float32": lambda data: _generated(data, [2.5, 300, True, "5", "1.5", 1 + 2j], np.float32),
    "generator_casts_bool": lambda data: _generated(data, [2.5, 0, 0.0, np.int32(3), "a"], np.bool_),
    "generator_casts_vectors": lambda data: _generated(data, [[1.5, 2], np.array([3, 4], np.int8), (5, 6)],
                                                       np.int32, (2,)),
    "generator_unconvertible": lambda data: _generated(data, [1, "a", 2], np.int64),
    "ignore_generator_unconvertible": lambda data: _generated(
        data, [1, "a", None, [1, 2], 7, [[1], [2, 3]], [1.5, "2"], 8], np.int64).ignore_errors(),
    "generator_string_number": lambda data: _generated(data, ["a", 3], "string"),
    "ignore_generator_strings": lambda data: _generated(data, ["a", b"b", 3, 2.5, None, "c"], "string").ignore_errors(),
    "generator_wrong_shape": lambda data: _generated(data, [[1, 2], [1, 2, 3]], np.int64, (2,)),
    "ignore_generator_wrong_shape": lambda data: _generated(data, [[1, 2], [1, 2, 3], [], [4, 5]], np.int64,
                                                            (2,)).ignore_errors(),
    "generator_structure": lambda data: _generated(data, [(1, 2), 3, (4, 5)], (np.int64, np.int64), ((), ())),
    "ignore_generator_structure": lambda data: _generated(data, [(1, 2), 3, (4, 5, 6), [7, 8]], (np.int64, np.int64),
                                                          ((), ())).ignore_errors(),
    "generator_python_types": lambda data: _generated(data, [(1.5, 1, "a")], (float, bool, object), ((), (), ())),
    "generator_int_type": lambda data: _generated(data, [1], int),
    "generator_str_type": lambda data: _generated(data, ["a"], str),
    "generator_raises": lambda data: data.Dataset.from_generator(_raising, output_types=np.int64, output_shapes=()),
    "ignore_generator_raises": lambda data: data.Dataset.from_generator(
        _raising, output_types=np.int64, output_shapes=()).ignore_errors(),
    "window_flat_map_empty": lambda data: data.Dataset.range(0).window(4).flat_map(lambda w: w.batch(4)),
    "window_tuple_flat_map_empty": lambda data: data.Dataset.zip(
        (data.Dataset.range(3), data.Dataset.range(3).batch(2))).skip(5).window(2).flat_map(
        lambda a, b: data.Dataset.zip((a, b)).batch(2)),
    "window_of_batches": lambda data: data.Dataset.range(10).batch(4).window(2).flat_map(lambda w: w.batch(2)),
    "window_mixed_shapes": lambda data: data.Dataset.range(10).batch(9).window(3).flat_map(lambda w: w.batch(3)),
    "scan_after_group_by_window": lambda data: data.Dataset.range(5).group_by_window(
        lambda x: x % 2, lambda k, w: w.batch(2), window_size=2).scan(np.int64(0), lambda c, e: (c + 1, e)),
    "flat_map_spec_traced": lambda data: data.Dataset.range(3).batch(2).flat_map(
        lambda x: data.Dataset.from_tensors(x).repeat(2)),
    "interleave_spec_traced": lambda data: data.Dataset.from_tensor_slices(np.ones((2, 2), np.int32)).padded_batch(
        2).interleave(lambda x: data.Dataset.from_tensors(x).repeat(2), cycle_length=3),
    "flat_map_spec_empty": lambda data: data.Dataset.range(0).batch(2).flat_map(
        lambda x: data.Dataset.from_tensors(x)),
    # save and load (the shards read with an explicit reader: TF's default cycles over as many shards as CPUs)
    "save_load": lambda data: _saved(data, data.Dataset.range(6).map(lambda x: (x, x * 2))),
    "save_load_structures": lambda data: _saved(data, data.Dataset.from_tensor_slices(
        {"a": np.array([[1, 2], [3, 4], [5, 6]], np.int32), "b": ["x", "yy", ""]})).map(lambda d: (d["a"], d["b"])),
    "save_load_batched": lambda data: _saved(data, data.Dataset.range(7).batch(3)),
    "save_load_filtered": lambda data: data.Dataset.from_tensors(
        _saved(data, data.Dataset.range(9).filter(lambda x: x % 2 == 0)).cardinality()),
    "save_load_empty": lambda data: _saved(data, data.Dataset.range(0)),
    "save_load_gzip": lambda data: _saved(data, data.Dataset.range(4).map(lambda x: x * 10), compression="GZIP",
                                          load_compression="GZIP"),
    "save_load_gzip_unsaid": lambda data: _saved(data, data.Dataset.range(4), compression="GZIP"),
    "save_load_gzip_unsaved": lambda data: _saved(data, data.Dataset.range(4), load_compression="GZIP"),
    "save_load_shards": lambda data: _saved(
        data, data.Dataset.range(10), shard_func=lambda x: x % 3,
        reader_func=lambda shards: shards.interleave(lambda shard: shard, cycle_length=3)),
    "save_load_shards_flat": lambda data: _saved(
        data, data.Dataset.range(10), shard_func=lambda x: x % 4, reader_func=lambda shards: shards.flat_map(
            lambda shard: shard)),
    "save_load_spec_given": lambda data: _saved(data, data.Dataset.range(3),
                                                element_spec=data.Dataset.range(3).element_spec),
    "save_resaved": lambda data: _saved(data, data.Dataset.range(2), again=data.Dataset.range(5, 8)),
    "save_shard_func_not_int64": lambda data: _saved(data, data.Dataset.range(3), shard_func=lambda x: x < 5),
}

LENGTHS = [3, 1, 5, 2, 7, 4, 6, 1, 2, 8, 3]


def _saved(data: Any, dataset: Any, again: Any = None, element_spec: Any = None, reader_func: Any = None,
           load_compression: str | None = None, **save: Any) -> Any:
    """``dataset`` saved to a new directory (then ``again`` over it, if given) and loaded back."""
    path = tempfile.mkdtemp(prefix="conformance-save-") + "/saved"
    dataset.save(path, **save)
    if again is not None:
        again.save(path, **save)
    return data.Dataset.load(path, element_spec=element_spec, reader_func=reader_func, compression=load_compression)


def _new_dir() -> str:
    return tempfile.mkdtemp(prefix="conformance-snapshot-")


def _two_snapshots(data: Any) -> Any:
    """A second pipeline snapshotted at the path of a finished one: it gets its own snapshot."""
    path = _new_dir()
    for _ in data.Dataset.range(3).snapshot(path):
        pass
    return data.Dataset.range(5).map(lambda x: x * 2).snapshot(path)


def _unequal_rows(data: Any) -> Any:
    """Pairs of a 2-row vector and a 1- or 2-row one: unbatching the pairs whose row counts differ fails."""
    return data.Dataset.zip((data.Dataset.range(10).batch(2),
                             data.experimental.from_list([[0], [1, 1], [2], [3, 3], [4]])))


def _choose_out_of_range(data: Any) -> Any:
    """choose_from_datasets over two inputs with choices 5 and -1 among the valid ones."""
    return data.Dataset.choose_from_datasets([data.Dataset.range(3), data.Dataset.range(10, 13)],
                                             data.Dataset.from_tensor_slices(np.array([0, 5, 1, -1, 0, 1], np.int64)))


def _generated(data: Any, values: list[Any], types: Any, shapes: Any = ()) -> Any:
    """``from_generator`` yielding ``values``, declared with ``output_types`` and ``output_shapes``."""
    return data.Dataset.from_generator(lambda: iter(values), output_types=types, output_shapes=shapes)


def _raising() -> Any:
    """A generator that yields 1 and 2, then raises (TF reports it as an InvalidArgumentError)."""
    yield 1
    yield 2
    raise ValueError("the generator failed")


def _failing(data: Any) -> Any:
    """``range(12)`` mapped to ``100 // ((x - 3) (x - 8))``: elements 3 and 8 fail (integer division by zero)."""
    return data.Dataset.range(12).map(lambda x: 100 // ((x - 3) * (x - 8)))


def _sequences(data: Any) -> Any:
    """``(length, [1 .. length])`` pairs of the lengths LENGTHS: an int32 scalar and an int64 vector."""
    return data.Dataset.zip((data.Dataset.from_tensor_slices(np.array(LENGTHS, np.int32)),
                             data.Dataset.from_tensor_slices(np.array(LENGTHS, np.int64)).flat_map(
                                 lambda n: data.Dataset.range(1, n + 1).batch(n + 1))))


def _sampled(data: Any, *sizes: int) -> list[Any]:
    """Datasets of ``range(100 k, 100 k + size)`` for each size: every element names its dataset."""
    return [data.Dataset.range(100 * k, 100 * k + size) for k, size in enumerate(sizes)]


def _unfused(data: Any, dataset: Any) -> Any:
    """``dataset`` with map_and_batch_fusion off (a map then batch stay two ops)."""
    options = data.Options()
    options.experimental_optimization.map_and_batch_fusion = False
    return dataset.with_options(options)


def _after_take_negative(data: Any) -> list[Any]:
    """Datasets downstream of ``take(-5)``, whose cardinality is -5: TF's ops compute with it like any count."""
    taken = data.Dataset.range(10).take(-5)
    return [taken.batch(3), taken.batch(3, drop_remainder=True), taken.batch(5), taken.skip(2), taken.repeat(2),
            taken.shard(2, 0), taken.shard(3, 2), taken.enumerate(), data.Dataset.zip((taken, data.Dataset.range(3))),
            taken.padded_batch(3), taken.window(3), data.Dataset.range(10).batch(2).take(-5).unbatch(),
            data.Dataset.range(3).repeat().take(-5).batch(2), data.Dataset.range(10).skip(3).take(-4).shard(2, 1)]


def all_specs() -> dict[str, Spec]:
    """Every case: the random pipelines, the second family, then the hand-written ones."""
    fixed = {f"fixed_{name}": {"fixed": name, "iterations": 2} for name in FIXED}
    return {**pipeline_specs(), **edge_specs(), **fixed}


def _keep(x: Any) -> Any:
    return x % 3 != 1


def _source(data: Any, source: list[Any]) -> Any:
    """The source dataset of a spec."""
    kind, args = source[0], source[1:]
    if kind in ("range", "range3"):
        return data.Dataset.range(*args)
    if kind == "tensors":
        return data.Dataset.from_tensors(np.arange(args[0], dtype=np.int64))
    return data.Dataset.from_tensor_slices(np.arange(args[0], dtype=np.float32) * 10)


def build(data: Any, spec: Spec) -> Any:
    """The dataset of ``spec`` built with ``data`` (``tf.data`` or ``mirrorlab.tf.data``)."""
    if "fixed" in spec:
        return FIXED[spec["fixed"]](data)
    ds = _source(data, spec["source"])
    for index, op in enumerate(spec["ops"]):
        name, args = op[0], op[1:]
        if name in ("zip_self", "concatenate_self"):
            twin = build(data, dict(spec, ops=spec["ops"][:index], options={}))
            ds = data.Dataset.zip((ds, twin)) if name == "zip_self" else ds.concatenate(twin)
        elif name == "enumerate":
            ds = ds.enumerate(start=args[0])
        elif name == "shuffle":
            ds = ds.shuffle(args[0], seed=args[1], reshuffle_each_iteration=args[2])
        elif name == "map":
            ds = ds.map(lambda x: x * 2 + 1)
        elif name == "filter":
            ds = ds.filter(_keep)
        elif name == "batch":
            ds = ds.batch(args[0], drop_remainder=args[1])
        elif name == "padded_batch":
            rank = len(ds.element_spec.shape)
            ds = ds.padded_batch(args[0], drop_remainder=args[1],
                                 padded_shapes=None if args[2] is None or rank == 0 else [args[2]] * rank)
        elif name == "take_while":
            ds = ds.take_while(lambda x, bound=args[0]: x < bound)
        elif name == "scan":
            ds = ds.scan(np.int64(0), lambda state, x: (state + 1, state))
        elif name == "flat_map":
            vectors = len(ds.element_spec.shape) > 0
            ds = ds.flat_map(lambda x, vectors=vectors: data.Dataset.from_tensor_slices(x) if vectors else
                             data.Dataset.from_tensors(x).repeat(2))  # bound now: TF traces it now
        elif name == "interleave":
            ds = ds.interleave(lambda x, k=args[0]: data.Dataset.from_tensors(x).repeat(k), cycle_length=args[1],
                               block_length=args[2])
        elif name in ("unbatch", "cache"):
            ds = getattr(ds, name)()
        elif name == "prefetch":
            ds = ds.prefetch(1)
        else:
            ds = getattr(ds, name)(*args)
    if spec["options"]:
        options = data.Options()
        for name, value in spec["options"].items():
            setattr(options.experimental_optimization, name, value)
        ds = ds.with_options(options)
    return ds


def _decoded(value: Any) -> Any:
    """``tolist()`` output with byte strings as text (JSON has no bytes)."""
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def _element(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_element(v) for v in value]
    if isinstance(value, dict):
        return {key: _element(v) for key, v in value.items()}
    array = as_numpy(value)
    return {"dtype": array.dtype.name, "shape": list(array.shape), "value": _decoded(array.tolist())}


def run_spec(data: Any, spec: Spec, cardinality: Any) -> dict[str, Any]:
    """``{"cardinality", "element_spec" (its repr), "iterations": [[element, ...] | {"error": ...}, ...]}`` for
    ``spec``."""
    try:
        ds = build(data, spec)
    except Exception as error:  # noqa: BLE001 - the error is the result
        return {"build_error": type(error).__name__}
    iterations: list[Any] = []
    for _ in range(spec["iterations"]):
        elements = []
        try:
            for value in ds:
                elements.append(_element(value))
                if len(elements) == MAX_ELEMENTS:
                    break
        except Exception as error:  # noqa: BLE001
            iterations.append({"error": type(error).__name__, "after": elements})
            continue
        iterations.append(elements)
    try:
        element_spec: Any = repr(ds.element_spec)  # read last: mirrorlab may look at the first element
    except Exception as error:  # noqa: BLE001
        element_spec = {"error": type(error).__name__}
    return {"cardinality": int(cardinality(ds)), "element_spec": element_spec, "iterations": iterations}
