"""Random dataset-distribution cases for fuzz_against_tf.py: a JSON spec (source, pipeline ops, shard policy, how it
is distributed, what is reduced per step) and the case function that runs it against ``api`` (adapters.py).

A spec is plain data so that a differing case prints as one line and replays with ``--replay``. ``shrink`` yields
smaller specs of the same shape (an op dropped, a size halved) for the runner's minimization.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .cases import attempt
from .dataset_cases import spec_json, text_files, with_policy
from .fuzz_collectives import mismatched, reduce_mismatched

__all__ = ["build", "generate", "shrink"]

Spec = dict[str, Any]
MAX_STEPS = 12
POLICIES = (None, "AUTO", "DATA", "OFF", "FILE")
CASTS = ("float32", "float64", "int32", "int64")


# -- generating -------------------------------------------------------------------------------------------


def _source(rng: random.Random) -> tuple[dict[str, Any], int]:
    """A random source and the rank of its elements' leaves."""
    kind = rng.choice(("range", "range", "slices", "text", "files"))
    n = rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 17, 24))
    if kind == "range":
        return {"kind": "range", "n": n}, 0
    if kind == "slices":
        structure = rng.choice(("single", "tuple", "dict"))
        width = rng.choice((0, 0, 2))          # 0: scalars per element, else vectors of this width
        dtype = rng.choice(("int64", "int32", "float32", "float64"))
        return {"kind": "slices", "n": n, "structure": structure, "width": width, "dtype": dtype}, int(width > 0)
    return {"kind": kind, "files": rng.randint(1, 4), "seed": rng.choice((None, 3))}, 0


def _op(rng: random.Random, rank: int, forever: bool, plain: bool = False) -> tuple[list[Any], int]:
    """A random pipeline op valid (mostly) for elements of ``rank`` (``plain``: int64 scalars, not nested) and the
    rank it leaves; after a repeat forever, no filter, take_while, unique or skip(-n), which could read forever without
    yielding (TF cannot be interrupted then)."""
    choices = ["map", "shuffle", "repeat", "take", "skip", "batch", "batch", "shard", "cache", "prefetch", "fail",
               "scan", "enumerate", "window", "padded_batch", "concatenate", "zip", "interleave"]
    choices += [] if forever else ["filter"] + (["take_while", "unique", "group_by_window"] if plain else [])
    if rank > 0:
        choices += ["unbatch", "rebatch"]
    name = rng.choice(choices)
    if name in ("window", "padded_batch", "group_by_window"):
        return [name, rng.randint(1, 4)], rank + 1
    if name == "take_while":
        return ["take_while", rng.choice((2, 5, 9))], rank
    if name == "interleave":
        return ["interleave", rng.choice((1, 2, 3)), rng.choice((1, 2))], rank
    if name in ("scan", "enumerate", "concatenate", "zip", "unique"):
        return [name], rank
    if name == "batch":
        return ["batch", rng.randint(1, 9), rng.random() < 0.3], rank + 1
    if name == "unbatch":
        return ["unbatch"], rank - 1
    if name == "rebatch":
        return ["rebatch", rng.randint(1, 6), rng.random() < 0.3], rank
    if name == "shuffle":
        return ["shuffle", rng.choice((1, 2, 4, 16)), rng.choice((1, 7, 42)), rng.random() < 0.7], rank
    if name == "repeat":
        return ["repeat", rng.choice((1, 2, 3, -1, None))], rank
    if name in ("take", "skip"):
        return [name, rng.choice((0, 1, 2, 3, 5, 10) if forever and name == "skip" else
                                 (-3, -1, 0, 1, 2, 3, 5, 10))], rank
    if name == "shard":
        shards = rng.randint(1, 3)
        return ["shard", shards, rng.randrange(shards)], rank
    if name == "filter":
        return (["filter", rng.choice((2, 3))], rank) if rank == 0 else (["map"], rank)
    if name == "fail":
        return ["fail", rng.choice((3, 4, 5))], rank
    return [name], rank


def generate(rng: random.Random) -> Spec:
    """A random dataset case."""
    source, rank = _source(rng)
    ops: list[list[Any]] = []
    plain = source["kind"] in ("range", "text", "files")
    for _ in range(rng.choice((1, 2, 2, 3, 3, 4, 5))):
        forever = any(op[0] == "repeat" and op[1] in (None, -1) for op in ops)
        op, rank = _op(rng, rank, forever, plain and rank == 0)
        ops.append(op)
        plain = plain and op[0] not in ("enumerate", "zip", "map")
    if rank == 0 and rng.random() < 0.8:
        ops.append(["batch", rng.randint(1, 9), rng.random() < 0.3])
    fails = [i for i, op in enumerate(ops) if op[0] == "fail"]
    if fails:  # an ignore_errors somewhere after the first failing map (an error would end the case at once)
        ops.insert(rng.randint(fails[0] + 1, len(ops)), ["ignore_errors"])
    spec: Spec = {"area": "dataset", "source": source, "ops": ops, "policy": rng.choice(POLICIES),
                  "epochs": rng.choice((1, 1, 2))}
    if rng.random() < 0.25:
        spec["from_function"] = {"shard": rng.random() < 0.7, "global_batch": rng.choice((None, 2, 3, 4, 6, 8))}
    spec["reduce"] = [[rng.choice(("SUM", "MEAN")), rng.choice((None, 0, 0, 0, -1)), rng.choice(CASTS)]
                      for _ in range(rng.choice((0, 1, 1, 2)))]
    if rng.random() < 0.3:
        spec["collective"] = rng.choice((["all_reduce", "SUM"], ["all_reduce", "MEAN"], ["all_gather", 0],
                                         ["gather", 0]))
    if rng.random() < 0.3:
        spec["loss"] = rng.choice((None, 2, 4, 8))   # compute_average_loss's global_batch_size
    if rng.random() < 0.3:
        spec["iterate"] = rng.choice(("next", "optional"))
    if rng.random() < 0.2:
        spec["describe"] = True
    return spec


def shrink(spec: Spec) -> Iterator[Spec]:
    """Smaller variants of ``spec``: fewer ops, reductions or epochs, a smaller source, plainer options."""
    for i in range(len(spec["ops"])):
        yield {**spec, "ops": spec["ops"][:i] + spec["ops"][i + 1:]}
    for i in range(len(spec["reduce"])):
        yield {**spec, "reduce": spec["reduce"][:i] + spec["reduce"][i + 1:]}
    for key in ("collective", "from_function", "loss", "iterate", "describe"):
        if key in spec:
            yield {k: v for k, v in spec.items() if k != key}
    if spec["epochs"] > 1:
        yield {**spec, "epochs": 1}
    if spec["policy"] is not None:
        yield {**spec, "policy": None}
    source = spec["source"]
    if source.get("n"):
        for n in sorted({source["n"] // 2, source["n"] - 1}):
            yield {**spec, "source": {**source, "n": n}}
    if source["kind"] == "slices" and source["structure"] != "single":
        yield {**spec, "source": {**source, "structure": "single"}}
    if source.get("files", 1) > 1:
        yield {**spec, "source": {**source, "files": source["files"] - 1}}


# -- building ---------------------------------------------------------------------------------------------


def _leaves(value: Any) -> list[Any]:
    """The leaves of a tuple/dict nest, in order (dict keys sorted, as tf.nest)."""
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _leaves(value[key])]
    return [value]


def _nest_map(fn: Callable[[Any], Any], value: Any) -> Any:
    """``fn`` applied to every leaf of a tuple/dict nest."""
    if isinstance(value, tuple):
        return tuple(_nest_map(fn, v) for v in value)
    if isinstance(value, dict):
        return {key: _nest_map(fn, v) for key, v in value.items()}
    return fn(value)


def _slices(source: dict[str, Any]) -> Any:
    """The arrays of a ``slices`` source: leaf k holds ``10 * k + i`` in row i."""
    n, width, dtype = source["n"], source["width"], source["dtype"]

    def leaf(k: int) -> np.ndarray:
        rows = np.arange(n) + 10 * k
        return (rows[:, None] * np.ones(width, np.int64) if width else rows).astype(dtype)

    structure = source["structure"]
    if structure == "single":
        return leaf(0)
    if structure == "tuple":
        return (leaf(0).astype(np.int64), (leaf(1), leaf(2)))
    return {"a": leaf(0).astype(np.int64), "b": leaf(1)}


def _make_source(api: Any, source: dict[str, Any]) -> Any:
    """The source dataset of a spec."""
    D = api.data.Dataset
    if source["kind"] == "range":
        return D.range(source["n"])
    if source["kind"] == "slices":
        return D.from_tensor_slices(_slices(source))
    names = text_files()[:source["files"]]
    if source["kind"] == "text":
        return api.data.TextLineDataset(names).map(api.parse_int64)
    seed = source["seed"]
    files = D.list_files(names, shuffle=seed is not None, seed=seed)
    return files.interleave(api.data.TextLineDataset, cycle_length=2).map(api.parse_int64)


def _filter_predicate(modulus: int) -> Callable[..., Any]:
    """Keep the elements whose first leaf is not 1 modulo ``modulus`` (a tuple element comes as arguments)."""
    def keep(*args: Any) -> Any:
        first = _leaves(args)[0]
        return first % modulus != 1
    return keep


def _double(*args: Any) -> Any:
    """Every leaf times two, in the element's structure."""
    value = args[0] if len(args) == 1 else args
    return _nest_map(lambda t: t * 2, value)


def _failing(modulus: int) -> Callable[..., Any]:
    """The element unchanged, but failing (integer division by zero) where its first leaf, if an integer, is 1
    modulo ``modulus`` (a batch fails if any row does)."""
    def fail(*args: Any) -> Any:
        first = _leaves(args)[0]
        dtype = getattr(first.dtype, "as_numpy_dtype", first.dtype)
        if np.dtype(dtype).kind in "iu":
            first = first + 0 * (1 // (first % modulus - 1))
        value = args[0] if len(args) == 1 else args
        leaves = iter([first] + _leaves(args)[1:])
        return _nest_map(lambda _: next(leaves), value)
    return fail


def _apply(dataset: Any, op: list[Any]) -> Any:
    """One pipeline op."""
    name, *arguments = op
    if name == "map":
        return dataset.map(_double)
    if name == "fail":
        return dataset.map(_failing(*arguments))
    if name == "filter":
        return dataset.filter(_filter_predicate(*arguments))
    if name == "batch":
        return dataset.batch(arguments[0], drop_remainder=arguments[1])
    if name == "rebatch":
        return dataset.rebatch(arguments[0], drop_remainder=arguments[1])
    if name == "shuffle":
        return dataset.shuffle(arguments[0], seed=arguments[1], reshuffle_each_iteration=arguments[2])
    if name == "prefetch":
        return dataset.prefetch(1)
    if name in ("repeat", "take", "skip", "shard", "cache", "unbatch", "ignore_errors"):
        return getattr(dataset, name)(*arguments)
    return _apply_structural(dataset, name, arguments)


def _apply_structural(dataset: Any, name: str, arguments: list[Any]) -> Any:
    """The ops that fold, regroup or combine elements (scan, window, zip, interleave, ...)."""
    Dataset = type(dataset)  # tf.data.Dataset or mirrorlab.tf.data.Dataset: both have the static constructors
    if name == "scan":
        return dataset.scan(np.int64(0), lambda count, element: (count + 1, element))
    if name == "take_while":
        return dataset.take_while(lambda x: x < arguments[0])
    if name == "unique":
        return dataset.unique()
    if name == "enumerate":
        return dataset.enumerate()
    if name == "window":
        size = arguments[0]
        def batched(*windows: Any) -> Any:
            window = windows[0] if len(windows) == 1 else windows
            return (Dataset.zip(window) if isinstance(window, (tuple, dict)) else window).batch(size)
        return dataset.window(size).flat_map(batched)
    if name == "padded_batch":
        return dataset.padded_batch(arguments[0])
    if name == "group_by_window":
        return dataset.group_by_window(lambda x: x % 2, lambda key, window: window.batch(arguments[0]),
                                       window_size=arguments[0])
    if name == "concatenate":
        return dataset.concatenate(dataset)
    if name == "zip":
        return Dataset.zip((dataset, dataset))
    if name == "interleave":
        return dataset.interleave(lambda *x: Dataset.from_tensors(x[0] if len(x) == 1 else x).repeat(2),
                                  cycle_length=arguments[0], block_length=arguments[1])


def _pipeline(api: Any, spec: Spec) -> Any:
    """The spec's pipeline with its shard policy."""
    dataset = _make_source(api, spec["source"])
    for op in spec["ops"]:
        dataset = _apply(dataset, op)
    return with_policy(api, dataset, spec["policy"])


def _from_function(api: Any, s: Any, spec: Spec) -> Any:
    """``distribute_datasets_from_function`` of the pipeline, sharded by input pipeline and batched per replica if
    the spec says so."""
    options = spec["from_function"]

    def dataset_fn(ctx: Any) -> Any:
        dataset = _pipeline(api, spec)
        if options["shard"]:
            dataset = dataset.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        if options["global_batch"]:
            dataset = dataset.batch(ctx.get_per_replica_batch_size(options["global_batch"]))
        return dataset

    return s.distribute_datasets_from_function(dataset_fn)


def _local(s: Any, element: Any) -> Any:
    """This worker's per-replica values of one step, in the element's structure."""
    if isinstance(element, tuple):
        return tuple(_local(s, e) for e in element)
    if isinstance(element, dict):
        return {key: _local(s, e) for key, e in element.items()}
    return list(s.experimental_local_results(element))


def _collective(api: Any, s: Any, leaf: Any, how: list[Any]) -> Any:
    """One collective over a step's first leaf (cast to float32): all_reduce/all_gather in replicas, or gather."""
    values = s.run(lambda x: api.cast(x, "float32"), args=(leaf,))
    name, argument = how
    if mismatched(api, s, values, None if name == "all_reduce" else argument):
        return "skipped: shapes differ"
    if name == "gather":
        return s.gather(values, axis=argument)
    context = api.get_replica_context
    if name == "all_reduce":
        return s.run(lambda x: context().all_reduce(getattr(api.ReduceOp, argument), x), args=(values,))
    return s.run(lambda x: context().all_gather(x, axis=argument), args=(values,))


def _step(api: Any, s: Any, spec: Spec, element: Any) -> dict[str, Any]:
    """One step's values and the spec's reductions of its first leaf."""
    record: dict[str, Any] = {"values": _local(s, element)}
    leaf = _leaves(element)[0]
    for k, (op, axis, dtype) in enumerate(spec["reduce"]):
        def reduced(op: str = op, axis: Any = axis, dtype: str = dtype) -> Any:
            values = s.run(lambda x: api.cast(x, dtype), args=(leaf,))
            if reduce_mismatched(api, s, values, axis):
                return "skipped: shapes differ"
            return s.reduce(getattr(api.ReduceOp, op), values, axis=axis)
        record[f"reduce{k}"] = attempt(reduced)
    if "collective" in spec:
        record["collective"] = attempt(lambda: _collective(api, s, leaf, spec["collective"]))
    if "loss" in spec:
        record["loss"] = attempt(lambda: _average_loss(api, s, leaf, spec["loss"]))
    return record


def _average_loss(api: Any, s: Any, leaf: Any, global_batch: int | None) -> dict[str, Any]:
    """``nn.compute_average_loss`` of a step's first leaf (as float32 per-example losses) in every replica, and
    its sum over the replicas (the global mean, as a custom training loop computes it)."""
    losses = s.run(lambda x: api.nn.compute_average_loss(api.cast(x, "float32"), global_batch_size=global_batch),
                   args=(leaf,))
    return {"replicas": list(s.experimental_local_results(losses)), "sum": s.reduce(api.ReduceOp.SUM, losses, None)}


_END = object()


def _next(iterator: Any, how: str) -> Any:
    """The next element of a distributed iterator, or _END: ``next()`` until StopIteration, or (``optional``)
    ``get_next_as_optional()`` until it is empty."""
    if how == "optional":
        optional = iterator.get_next_as_optional()
        return optional.get_value() if bool(optional.has_value()) else _END
    try:
        return next(iterator)
    except StopIteration:
        return _END


def _after_end(iterator: Any, how: str) -> Any:
    """What an exhausted iterator does next: ``get_next()`` (TF: OutOfRangeError), or an empty optional's
    ``get_value()``."""
    if how == "optional":
        return attempt(lambda: iterator.get_next_as_optional().get_value())
    return attempt(iterator.get_next)


def _epoch(api: Any, s: Any, spec: Spec, distributed: Any) -> dict[str, Any]:
    """One pass over the distributed dataset (at most MAX_STEPS steps, as the spec iterates: a ``for`` loop, or
    ``next``/``optional`` with what the iterator does after its end) and how it ended."""
    steps: list[Any] = []
    how = spec.get("iterate", "for")
    record: dict[str, Any] = {"steps": steps}
    try:
        iterator = iter(distributed)
        if spec.get("describe"):
            record["iterator_spec"] = spec_json(iterator.element_spec)
        while (element := _next(iterator, how)) is not _END:
            steps.append(_step(api, s, spec, element))
            if len(steps) == MAX_STEPS:
                return {**record, "end": "stopped"}
    except Exception as error:
        return {**record, "end": error}
    if how != "for":
        record["after_end"] = _after_end(iterator, how)
    return {**record, "end": "exhausted"}


def _described(distributed: Any) -> dict[str, Any]:
    """The distributed dataset's element_spec and cardinality."""
    return {"element_spec": attempt(lambda: spec_json(distributed.element_spec)),
            "cardinality": attempt(lambda: distributed.cardinality)}


def build(spec: Spec) -> Callable[[Any, Any], dict[str, Any]]:
    """The case function of ``spec``: distribute the pipeline and iterate it for the spec's epochs."""
    def fn(api: Any, s: Any) -> dict[str, Any]:
        try:
            distributed = (_from_function(api, s, spec) if "from_function" in spec
                           else s.experimental_distribute_dataset(_pipeline(api, spec)))
        except Exception as error:
            return {"distribute": error}
        epochs = {"described": _described(distributed)} if spec.get("describe") else {}
        epochs["epoch0"] = _epoch(api, s, spec, distributed)
        for e in range(1, spec["epochs"]):
            # Another pass only after one that reached the end: TF's prefetching reads ahead of an unfinished pass
            # by a varying amount, and shared state (a shuffle's seeds, a cache) then depends on timing.
            if epochs[f"epoch{e - 1}"]["end"] == "exhausted":
                epochs[f"epoch{e}"] = _epoch(api, s, spec, distributed)
        return epochs
    return fn
