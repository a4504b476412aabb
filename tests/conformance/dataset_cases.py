"""Dataset-distribution conformance cases: how ``experimental_distribute_dataset`` and
``distribute_datasets_from_function`` split input across replicas, written once against ``api`` (adapters.py).

Setups (as in cases.py): ``A`` = MirroredStrategy over 2 CPUs in one process; ``C`` = MWMS on 2 workers x 1 CPU
(TF: two processes; mirrorlab: ``SimCluster(workers=2)``). Every case runs in both; its result is recorded per
worker (golden files ``golden/datasets_A.json`` and ``golden/datasets_C.json``, see record_dataset_golden.py).

A case iterates its distributed dataset to the end and returns ``{"steps", "mean", "sum", "error",
"error_phase"}``: ``steps`` holds, per step, the list of this worker's per-replica values (normalized: dtype, shape
and value); ``mean``/``sum`` are ``strategy.reduce(MEAN|SUM, values, axis=0)`` of that step's values as float32 (the
global mean over uneven and empty replicas); ``error`` is the exception that ended the case early (class name and
first line of its message) and ``error_phase`` where it was raised: ``"distribute"`` (making the dataset or
calling ``experimental_distribute_dataset`` / ``distribute_datasets_from_function``) or ``"iterate"`` (at the
``next()`` after the recorded steps).

Families (``FAMILIES``; case names are ``<family>_n<n>_G<G>_<POLICY>`` unless said otherwise):

* ``range``: ``Dataset.range(n).batch(G)`` for n in N_VALUES, G in G_VALUES under AUTO/DATA/OFF/FILE set with
  ``with_options``; ``range_default_n<n>_G<G>`` sets no options at all;
* variants of it on a smaller grid, under AUTO and OFF: ``drop`` (``batch(G, drop_remainder=True)``), ``map``
  (``batch(G).map(x * 2)``: TF's compute_batch_size gives -1, so the legacy split), ``drop_map``
  (``batch(G, drop_remainder=True).map(x * 2)``: a static batch dimension, which TF's Python compute_batch_size
  reads before asking the graph), ``filter`` (``batch(G).filter(first element % 3 != 1)``), ``batch_repeat2``,
  ``repeat2_batch``, ``batch_take2``, ``take5_batch`` and ``batch_repeat`` (``repeat()`` forever, stopped after
  FOREVER_STEPS steps);
* ``tuple``: ``from_tensor_slices((float32 [n, 2], int64 [n])).batch(G)`` (no reductions);
* ``text_files<k>_G<G>_<POLICY>``: ``TextLineDataset(first k of the 4 files).map(parse int64).batch(G)``; the files
  hold 4, 4, 4 and 5 lines (``text_files``). With one file, FILE and AUTO fail on worker 0 of C ("Could not apply
  FILE based sharding") and break the cluster: TF records them in clusters of their own (``DatasetCase.isolated``);
* ``from_function_n<n>_G<G>``: ``distribute_datasets_from_function`` with ``range(n).shard(ctx.num_input_pipelines,
  ctx.input_pipeline_id).batch(ctx.get_per_replica_batch_size(G))``, also recording the InputContext;
* ``range_unbatched``: an unbatched dataset of scalars; ``from_tensors_vector``: one unbatched element of shape [3]
  (a static first dimension, which TF takes as the batch dimension);
* seeded shuffles, each distributed dataset iterated for two epochs (``epoch1``/``epoch2``: the second reshuffles):
  ``shuffle`` (``range(n).shuffle(B, seed=7).batch(G)``), ``batch_shuffle``, ``shuffle_repeat2`` (TF fuses
  shuffle and repeat), ``shuffle_fixed`` (``reshuffle_each_iteration=False``), named ``<family>_n<n>_B<B>_G<G>_<POLICY>``;
  ``shuffled_files<k>_G<G>_<POLICY>``: seeded ``list_files`` of the first k text files, interleaved two at a time
  (FILE sharding moves the file shuffle after the shard);
* how a distributed dataset is used (``use_<use>_<pipeline>``, pipelines in ``PIPELINES``: dicts, nested tuples,
  strings, bools, zip/enumerate/concatenate, padded_batch, unbatch, from_tensors, cache, interleave, text lines,
  list_files, random, sample_from_datasets, choose_from_datasets, merged options, the HINT policy, ...):
  ``described`` (the distributed dataset's and its iterator's element_spec, its cardinality, then one pass),
  ``twice`` (two ``for`` passes), ``next`` (``iter``/``next`` to StopIteration and past it, ``get_next()`` at the
  end), ``optional`` (``get_next_as_optional`` until empty, then ``get_value``), ``reduce``
  (``DistributedDataset.reduce``);
* ``input_options_<name>``: ``experimental_distribute_dataset(..., options=InputOptions(...))`` and the options'
  fields; ``from_function_<name>``: ``distribute_datasets_from_function`` with unbatched, differently batched,
  infinite, dict and string pipelines, ``get_per_replica_batch_size`` errors, a dataset_fn that returns no
  dataset, and the InputOptions placement checks (PER_REPLICA is left out: TF's MirroredStrategy then keeps
  per-replica input workers for every later dataset of the strategy, see ``mirrored_strategy.py``
  ``_input_workers_with_options``);
* ``average_loss_<name>``: ``nn.compute_average_loss`` in every replica on the batches of ``range(11).batch(8)`` (the
  last step uneven, a replica empty), with and without sample weights and ``global_batch_size``, losses of several
  dtypes (``AVERAGE_LOSSES``), summed with ``strategy.reduce``; ``average_loss_scalar_losses``: rank-0 losses.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .cases import attempt

__all__ = [
    "DATASET_CASES",
    "DATASET_SETUPS",
    "FAMILIES",
    "DatasetCase",
    "golden_name",
    "recorded_dataset_cases",
    "text_files",
]

DATASET_SETUPS = ("A", "C")
POLICIES = ("AUTO", "DATA", "OFF", "FILE")
N_VALUES = (0, 1, 2, 3, 5, 7, 8, 9, 13, 16, 17)
G_VALUES = (1, 2, 3, 4, 5, 7, 8)
# The variants run on a smaller grid under AUTO and OFF only: on a range, DATA is what AUTO falls back to, and FILE
# fails in C (the ``range`` family covers both).
VARIANT_N = (0, 1, 5, 9, 13)
VARIANT_G = (1, 3, 8)
VARIANT_POLICIES = ("AUTO", "OFF")
TUPLE_N = (0, 3, 5, 8)
TUPLE_G = (1, 2, 4, 8)
MAX_STEPS = 64          # a safety stop; the longest finite case takes 53 steps
FOREVER_STEPS = 5       # where ``repeat()`` without a count is stopped
TEXT_LINES = (4, 4, 4, 5)

Result = dict[str, Any]


@dataclass(frozen=True)
class DatasetCase:
    """One named case; ``fn(api, strategy)`` returns ``{label: value}`` (normalized by ``Api.run_case``)."""

    name: str
    fn: Callable[[Any, Any], Result]
    family: str
    setups: tuple[str, ...] = DATASET_SETUPS
    isolated: tuple[str, ...] = ()     # setups where TF must run it in a fresh cluster (the cluster breaks)


DATASET_CASES: dict[str, DatasetCase] = {}
FAMILIES: list[str] = []


def add(name: str, family: str, fn: Callable[[Any, Any], Result], isolated: tuple[str, ...] = ()) -> None:
    """Register a case."""
    assert name not in DATASET_CASES, name
    if family not in FAMILIES:
        FAMILIES.append(family)
    DATASET_CASES[name] = DatasetCase(name, fn, family, DATASET_SETUPS, isolated)


def recorded_dataset_cases(setup: str, isolated: bool | None = None) -> list[str]:
    """Names of the cases of ``setup`` in table order (only the isolated or only the batched ones if asked)."""
    return [name for name, c in DATASET_CASES.items()
            if setup in c.setups and (isolated is None or (setup in c.isolated) == isolated)]


def golden_name(setup: str) -> str:
    """The golden file stem of ``setup`` (``harness.load_golden``/``save_golden`` take it as the setup)."""
    return f"datasets_{setup}"


# -- input files --------------------------------------------------------------------------------------

_files_lock = threading.Lock()
_files: list[str] = []


def text_files() -> list[str]:
    """The 4 text files of the ``text`` cases (created once per process in a temporary directory): file i holds
    the lines ``10*i, 10*i + 1, ...`` (4 lines each, 5 in the last one)."""
    with _files_lock:
        if not _files:
            folder = Path(tempfile.mkdtemp(prefix="conformance-datasets-"))
            atexit.register(shutil.rmtree, folder, True)
            for i, lines in enumerate(TEXT_LINES):
                path = folder / f"part-{i}.txt"
                path.write_text("".join(f"{10 * i + j}\n" for j in range(lines)))
                _files.append(str(path))
        return list(_files)


# -- running a distributed dataset ------------------------------------------------------------------------


def with_policy(api: Any, dataset: Any, policy: str | None) -> Any:
    """``dataset`` with the named auto-shard policy (unchanged for None)."""
    if policy is None:
        return dataset
    options = api.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(api.data.experimental.AutoShardPolicy, policy)
    return dataset.with_options(options)


def replica_values(s: Any, element: Any) -> list[Any]:
    """This worker's per-replica values of one step (a tuple element gives one tuple per replica)."""
    if isinstance(element, tuple):
        parts = [replica_values(s, component) for component in element]
        return [tuple(p[i] for p in parts) for i in range(len(parts[0]))]
    return list(s.experimental_local_results(element))


def iterate(api: Any, s: Any, make: Callable[[], Any], reduce: bool = True, max_steps: int = MAX_STEPS) -> Result:
    """Iterate the distributed dataset ``make()`` returns, recording every step (see the module docstring)."""
    steps: list[Any] = []
    result: Result = {"steps": steps}
    if reduce:
        result["mean"], result["sum"] = [], []
    phase = "distribute"
    try:
        distributed = make()
        phase = "iterate"
        for element in distributed:
            steps.append(replica_values(s, element))
            if reduce:
                values = s.run(lambda x: api.cast(x, "float32"), args=(element,))
                result["mean"].append(s.reduce(api.ReduceOp.MEAN, values, axis=0))
                result["sum"].append(s.reduce(api.ReduceOp.SUM, values, axis=0))
            if len(steps) == max_steps:
                result["stopped_after"] = max_steps
                break
    except Exception as error:
        result["error"], result["error_phase"] = error, phase
    else:
        result["error"], result["error_phase"] = None, None
    return result


def distribute(api: Any, s: Any, build: Callable[[Any], Any], policy: str | None, reduce: bool = True,
               max_steps: int = MAX_STEPS) -> Result:
    """``iterate`` over ``s.experimental_distribute_dataset(with_policy(build(api.data.Dataset)))``."""
    return iterate(api, s, lambda: s.experimental_distribute_dataset(with_policy(api, build(api.data.Dataset), policy)),
                   reduce, max_steps)


# -- the cases ------------------------------------------------------------------------------------------


def _range_case(n: int, g: int, policy: str | None) -> Callable[[Any, Any], Result]:
    return lambda api, s: distribute(api, s, lambda D: D.range(n).batch(g), policy)


for _n, _g, _p in itertools.product(N_VALUES, G_VALUES, POLICIES):
    add(f"range_n{_n}_G{_g}_{_p}", "range", _range_case(_n, _g, _p))

for _n, _g in itertools.product((5, 9, 13), (3, 8)):
    add(f"range_default_n{_n}_G{_g}", "range_default", _range_case(_n, _g, None))


def _is_kept(x: Any) -> Any:
    """The filter predicate of the ``filter`` variant: the batch's first element is not 1 modulo 3."""
    return x[0] % 3 != 1


VARIANTS: dict[str, Callable[[Any, int, int], Any]] = {
    "drop": lambda D, n, g: D.range(n).batch(g, drop_remainder=True),
    "map": lambda D, n, g: D.range(n).batch(g).map(lambda x: x * 2),
    "drop_map": lambda D, n, g: D.range(n).batch(g, drop_remainder=True).map(lambda x: x * 2),
    "filter": lambda D, n, g: D.range(n).batch(g).filter(_is_kept),
    "batch_repeat2": lambda D, n, g: D.range(n).batch(g).repeat(2),
    "repeat2_batch": lambda D, n, g: D.range(n).repeat(2).batch(g),
    "batch_take2": lambda D, n, g: D.range(n).batch(g).take(2),
    "take5_batch": lambda D, n, g: D.range(n).take(5).batch(g),
    "batch_repeat": lambda D, n, g: D.range(n).batch(g).repeat(),
}


def _variant_case(variant: str, n: int, g: int, policy: str) -> Callable[[Any, Any], Result]:
    build = VARIANTS[variant]
    steps = FOREVER_STEPS if variant == "batch_repeat" else MAX_STEPS
    return lambda api, s: distribute(api, s, lambda D: build(D, n, g), policy, max_steps=steps)


for _v in VARIANTS:
    for _n, _g, _p in itertools.product(VARIANT_N, VARIANT_G, VARIANT_POLICIES):
        add(f"{_v}_n{_n}_G{_g}_{_p}", _v, _variant_case(_v, _n, _g, _p))


def _tuple_case(n: int, g: int, policy: str) -> Callable[[Any, Any], Result]:
    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2) / 2
    y = np.arange(n, dtype=np.int64) * 10
    return lambda api, s: distribute(api, s, lambda D: D.from_tensor_slices((x, y)).batch(g), policy, reduce=False)


for _n, _g, _p in itertools.product(TUPLE_N, TUPLE_G, POLICIES):
    add(f"tuple_n{_n}_G{_g}_{_p}", "tuple", _tuple_case(_n, _g, _p))


def _text_case(files: int, g: int, policy: str) -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """TextLineDataset over the first ``files`` files, parsed and batched."""
        names = text_files()[:files]
        return distribute(api, s, lambda D: api.data.TextLineDataset(names).map(api.parse_int64).batch(g), policy)
    return fn


for _k, _g, _p in itertools.product((1, 2, 3, 4), (1, 2, 3, 4, 8), POLICIES):
    # One file for 2 workers: worker 0 raises at its first next(), worker 1's has-data collective then fails.
    add(f"text_files{_k}_G{_g}_{_p}", "text", _text_case(_k, _g, _p),
        isolated=("C",) if _k == 1 and _p in ("FILE", "AUTO") else ())


def _failing(D: Any) -> Any:
    """``range(12)`` mapped to ``100 // ((x - 3) (x - 8))``: elements 3 and 8 fail (integer division by zero)."""
    return D.range(12).map(lambda x: 100 // ((x - 3) * (x - 8)))


IGNORING: dict[str, Callable[[Any, int], Any]] = {
    "ignore_then_batch": lambda D, g: _failing(D).ignore_errors().batch(g),
    "batch_then_ignore": lambda D, g: _failing(D).batch(g).ignore_errors(),
    "ignore_shuffle_batch": lambda D, g: _failing(D).shuffle(5, seed=2).ignore_errors().batch(g),
}


def _ignoring_case(variant: str, g: int, policy: str) -> Callable[[Any, Any], Result]:
    return lambda api, s: distribute(api, s, lambda D: IGNORING[variant](D, g), policy)


for _v, _g, _p in itertools.product(IGNORING, (3, 4), ("AUTO", "DATA", "OFF")):
    add(f"{_v}_G{_g}_{_p}", "ignore_errors", _ignoring_case(_v, _g, _p))


WALKED: dict[str, Callable[[Any], Any]] = {  # ops TF's FILE sharding walks through, or gives up at (AUTO: DATA)
    "scan": lambda lines: lines.scan(np.int64(0), lambda total, x: (total + x, x)),
    "take_while": lambda lines: lines.take_while(lambda x: x >= 0),
    "unique": lambda lines: lines.unique(),
    "group_by_window": lambda lines: lines.group_by_window(lambda x: x % 2, lambda key, w: w.batch(2), window_size=2)
    .unbatch(),
    "ignore_errors": lambda lines: lines.ignore_errors(),
    "window": lambda lines: lines.window(2).flat_map(lambda w: w),
    "zip": lambda lines: lines.enumerate().map(lambda i, x: x),
    "concatenate": lambda lines: lines.take(3).concatenate(lines.skip(3)),
}


def _walked_case(op: str, files: int) -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """Text files through ``op``, batched by 3, AUTO-sharded."""
        names = text_files()[:files]
        return distribute(api, s, lambda D: WALKED[op](api.data.TextLineDataset(names).map(api.parse_int64)).batch(3),
                          "AUTO")
    return fn


for _op, _k in itertools.product(WALKED, (2, 4)):
    add(f"file_walk_{_op}_files{_k}", "file_walk", _walked_case(_op, _k))

NESTED_FLAT_MAPS: dict[str, Callable[[Any, Any], Any]] = {  # TF shards the output of the inner one, element-wise
    "text_interleave": lambda api, D: api.data.TextLineDataset(text_files()[:2]).map(api.parse_int64).interleave(
        lambda x: D.from_tensors(x), cycle_length=2),
    "slices_flat_map_interleave": lambda api, D: D.from_tensor_slices(np.arange(9, dtype=np.int64)).flat_map(
        lambda x: D.from_tensors(x).repeat(2)).interleave(lambda x: D.from_tensors(x), cycle_length=1),
    "list_files_interleave_flat_map": lambda api, D: D.list_files(text_files()[:4], shuffle=False).interleave(
        api.data.TextLineDataset, cycle_length=2).map(api.parse_int64).flat_map(lambda x: D.from_tensors(x)),
}

for _v in NESTED_FLAT_MAPS:
    add(f"nested_flat_map_{_v}", "nested_flat_map",
        (lambda build: lambda api, s: distribute(api, s, lambda D: build(api, D).batch(3), "AUTO"))(NESTED_FLAT_MAPS[_v]))


def _from_function_case(n: int, g: int) -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """distribute_datasets_from_function, sharding by input pipeline and batching per replica."""
        contexts: list[Any] = []

        def dataset_fn(ctx: Any) -> Any:
            """This worker's pipeline, from its InputContext."""
            contexts.append({"num_input_pipelines": ctx.num_input_pipelines,
                             "input_pipeline_id": ctx.input_pipeline_id,
                             "num_replicas_in_sync": ctx.num_replicas_in_sync, "str": str(ctx)})
            per_replica = ctx.get_per_replica_batch_size(g)
            return api.data.Dataset.range(n).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(per_replica)

        result = iterate(api, s, lambda: s.distribute_datasets_from_function(dataset_fn))
        result["input_contexts"] = contexts
        return result
    return fn


for _n, _g in itertools.product((0, 1, 5, 8, 13, 16), (2, 3, 4, 8)):
    add(f"from_function_n{_n}_G{_g}", "from_function", _from_function_case(_n, _g))

add("range_unbatched", "unbatched", lambda api, s: distribute(api, s, lambda D: D.range(4), "AUTO"))
add("from_tensors_vector", "unbatched",
    lambda api, s: distribute(api, s, lambda D: D.from_tensors(np.array([1.0, 2.0, 3.0], np.float32)), "AUTO"))


# -- seeded shuffles: TF's order per worker and per epoch ------------------------------------------------------


def _two_epochs(api: Any, s: Any, build: Callable[[Any], Any], policy: str | None) -> Result:
    """Iterate one distributed dataset twice: the second epoch reshuffles with the shuffle's next seeds."""
    distributed: list[Any] = []

    def make() -> Any:
        if not distributed:
            distributed.append(s.experimental_distribute_dataset(with_policy(api, build(api.data.Dataset), policy)))
        return distributed[0]

    return {"epoch1": iterate(api, s, make, reduce=False), "epoch2": iterate(api, s, make, reduce=False)}


SHUFFLES: dict[str, Callable[[Any, int, int, int], Any]] = {
    "shuffle": lambda D, n, b, g: D.range(n).shuffle(b, seed=7).batch(g),
    "batch_shuffle": lambda D, n, b, g: D.range(n).batch(g).shuffle(b, seed=3),
    "shuffle_repeat2": lambda D, n, b, g: D.range(n).shuffle(b, seed=11).repeat(2).batch(g),
    "shuffle_fixed": lambda D, n, b, g: D.range(n).shuffle(b, seed=5, reshuffle_each_iteration=False).batch(g),
}


def _shuffle_case(variant: str, n: int, b: int, g: int, policy: str) -> Callable[[Any, Any], Result]:
    return lambda api, s: _two_epochs(api, s, lambda D: SHUFFLES[variant](D, n, b, g), policy)


for _v in SHUFFLES:
    for _n, _b, _g, _p in itertools.product((0, 5, 13), (1, 4, 16), (3, 8), VARIANT_POLICIES):
        add(f"{_v}_n{_n}_B{_b}_G{_g}_{_p}", _v, _shuffle_case(_v, _n, _b, _g, _p))


def _shuffled_files_case(files: int, g: int, policy: str) -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """Seeded ``list_files`` (FILE sharding moves the shuffle after the shard), one file at a time."""
        names = text_files()[:files]
        return _two_epochs(api, s, lambda D: D.list_files(names, seed=3)
                           .interleave(api.data.TextLineDataset, cycle_length=2)
                           .map(api.parse_int64).batch(g), policy)
    return fn


for _k, _g, _p in itertools.product((2, 3, 4), (2, 3), ("AUTO", "DATA", "OFF")):
    add(f"shuffled_files{_k}_G{_g}_{_p}", "shuffled_files", _shuffled_files_case(_k, _g, _p))


# -- from_generator (TF cannot shard it by file: AUTO falls back to DATA) and snapshot ------------------------


def _generator_case(kind: str, g: int, policy: str) -> Callable[[Any, Any], Result]:
    """Seven elements from a Python generator, batched by ``g``: pairs with declared shapes, or vectors declared
    without a shape (unknown rank)."""
    def build(D: Any) -> Any:
        if kind == "shapes":
            return D.from_generator(lambda: ((np.int64(i), np.full(2, i / 2, np.float32)) for i in range(7)),
                                    output_types=(np.int64, np.float32), output_shapes=((), (2,))).batch(g)
        return D.from_generator(lambda: (np.full(2, i, np.float32) for i in range(7)), output_types=np.float32) \
            .batch(g)
    return lambda api, s: distribute(api, s, build, policy, reduce=kind == "unknown_rank")


for _kind, _g, _p in itertools.product(("shapes", "unknown_rank"), (3, 4), ("AUTO", "DATA", "OFF")):
    add(f"generator_{_kind}_G{_g}_{_p}", "generator", _generator_case(_kind, _g, _p))


def _snapshot_case(g: int, policy: str) -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """A reshuffling shuffle before a snapshot: the second epoch reads the first one's order back."""
        path = tempfile.mkdtemp(prefix="conformance-snapshot-")
        return _two_epochs(api, s, lambda D: D.range(10).shuffle(10, seed=2).snapshot(path).batch(g), policy)
    return fn


for _g, _p in itertools.product((3, 4), ("AUTO", "DATA", "OFF")):
    add(f"snapshot_G{_g}_{_p}", "snapshot", _snapshot_case(_g, _p))


# -- how a distributed dataset is used: iterators, optionals, specs, structures, input options ----------------


def spec_json(spec: Any) -> Any:
    """A (distributed) element spec as plain data: PerReplicaSpec -> its replicas' specs, TensorSpec -> its
    repr, shape (None for an unknown rank) and NumPy dtype name."""
    if type(spec).__name__ == "PerReplicaSpec":
        return {"PerReplicaSpec": [spec_json(s) for s in spec._value_specs]}
    if isinstance(spec, tuple):
        return tuple(spec_json(s) for s in spec)
    if isinstance(spec, dict):
        return {key: spec_json(s) for key, s in spec.items()}
    shape = spec.shape
    dims = None if shape is None or getattr(shape, "rank", 0) is None else [None if d is None else int(d)
                                                                            for d in shape]
    dtype = np.dtype(getattr(spec.dtype, "as_numpy_dtype", spec.dtype)).name
    return {"repr": repr(spec), "shape": dims, "dtype": dtype}


def described(api: Any, s: Any, make: Callable[[], Any]) -> Result:
    """The distributed dataset's element_spec and cardinality, its iterator's element_spec, then one pass."""
    result: Result = {}
    try:
        distributed = make()
        result["element_spec"] = spec_json(distributed.element_spec)
        result["cardinality"] = distributed.cardinality
        result["iterator_spec"] = spec_json(iter(distributed).element_spec)
    except Exception as error:
        result["describe_error"] = error
        return result
    result.update(iterate(api, s, lambda: distributed, reduce=False, max_steps=FOREVER_STEPS * 4))
    return result


def _next_loop(api: Any, s: Any, make: Callable[[], Any]) -> Result:
    """``iter()`` and ``next()`` until StopIteration, once more after the end, then ``get_next()`` (TF:
    OutOfRangeError) on a fresh iterator run to its end."""
    steps: list[Any] = []
    iterator = iter(make())
    while True:
        try:
            steps.append(replica_values(s, next(iterator)))
        except StopIteration:
            break
    result: Result = {"steps": steps}
    try:
        next(iterator)
        result["after_end"] = "value"
    except StopIteration:
        result["after_end"] = "StopIteration"
    fresh = iter(make())
    for _ in steps:
        fresh.get_next()
    try:
        fresh.get_next()
        result["get_next_after_end"] = "value"
    except Exception as error:
        result["get_next_after_end"] = error
    return result


def _optionals(api: Any, s: Any, make: Callable[[], Any]) -> Result:
    """``get_next_as_optional()`` until it is empty, then ``get_value()`` of the empty optional."""
    iterator = iter(make())
    seen: list[Any] = []
    while len(seen) < MAX_STEPS:
        optional = iterator.get_next_as_optional()
        present = optional.has_value()
        seen.append({"has_value": present, "value": replica_values(s, optional.get_value()) if bool(present)
                     else None})
        if not bool(present):
            break
    try:
        result: Any = optional.get_value()
    except Exception as error:
        result = error
    return {"optionals": seen, "empty_get_value": result}


def _twice(api: Any, s: Any, make: Callable[[], Any]) -> Result:
    """One distributed dataset iterated twice with ``for`` (each pass a fresh iterator)."""
    distributed = make()
    return {"pass1": iterate(api, s, lambda: distributed, reduce=False),
            "pass2": iterate(api, s, lambda: distributed, reduce=False)}


def _reduced(api: Any, s: Any, make: Callable[[], Any]) -> Result:
    """``DistributedDataset.reduce`` summing every step's values (``strategy.reduce(SUM, axis=0)``)."""
    total = make().reduce(api.cast(np.int64(0), "int64"), lambda state, x: state + s.reduce(
        api.ReduceOp.SUM, s.run(lambda v: api.cast(v, "int64"), args=(x,)), axis=0))
    return {"total": total}


USES: dict[str, Callable[[Any, Any, Callable[[], Any]], Result]] = {
    "twice": _twice, "next": _next_loop, "optional": _optionals, "described": described, "reduce": _reduced}

# Pipelines (``lambda api, D``) distributed with experimental_distribute_dataset (AUTO unless the name says).
PIPELINES: dict[str, Callable[[Any, Any], Any]] = {
    "range5_G4": lambda api, D: D.range(5).batch(4),
    "range9_G3": lambda api, D: D.range(9).batch(3),
    "range9_G3_OFF": lambda api, D: with_policy(api, D.range(9).batch(3), "OFF"),
    "range8_G4_drop": lambda api, D: D.range(8).batch(4, drop_remainder=True),
    "range9_G3_drop": lambda api, D: D.range(9).batch(3, drop_remainder=True),
    "range9_G4_drop_OFF": lambda api, D: with_policy(api, D.range(9).batch(4, drop_remainder=True), "OFF"),
    "range7_G4_repeat": lambda api, D: D.range(7).batch(4).repeat(),
    "range7_G4_drop_repeat": lambda api, D: D.range(7).batch(4, drop_remainder=True).repeat(),
    "range9_G4_filter": lambda api, D: D.range(9).batch(4).filter(lambda x: x[0] >= 0),
    "range0_G4": lambda api, D: D.range(0).batch(4),
    "range_step_G3": lambda api, D: D.range(3, 20, 4).batch(3),
    "range_int32_G4": lambda api, D: D.range(6, output_type=np.int32).batch(4),
    "dict_G3": lambda api, D: D.from_tensor_slices(
        {"x": np.arange(10, dtype=np.float32).reshape(5, 2), "y": np.arange(5)}).batch(3),
    "nested_G4": lambda api, D: D.from_tensor_slices(
        ((np.arange(5), np.arange(5) * 0.5), {"flag": np.arange(5) > 2})).batch(4),
    "strings_G2": lambda api, D: D.from_tensor_slices(["a", "bb", "ccc"]).batch(2),
    "strings_G3_OFF": lambda api, D: with_policy(api, D.from_tensor_slices(["a", "bb", "ccc", "d"]).batch(3), "OFF"),
    "bool_G3": lambda api, D: D.from_tensor_slices(np.arange(5) % 2 == 0).batch(3),
    "zip_G4": lambda api, D: D.zip((D.range(6), D.range(10, 16))).batch(4),
    "zip_dict_G3": lambda api, D: D.zip({"a": D.range(5), "b": D.range(5).map(lambda x: x * 2)}).batch(3),
    "enumerate_G3": lambda api, D: D.range(10, 15).enumerate(start=2).batch(3),
    "batch_enumerate": lambda api, D: D.range(7).batch(3).enumerate(),
    "concatenate_G3": lambda api, D: D.range(4).concatenate(D.range(100, 103)).batch(3),
    "batch_concatenate": lambda api, D: D.range(5).batch(3).concatenate(D.range(5, 9).batch(2)),
    "padded_G3": lambda api, D: D.range(8).batch(3).padded_batch(2),
    "padded_shapes_G3": lambda api, D: D.range(7).batch(2).padded_batch(3, padded_shapes=[4]),
    "padded_drop_G2": lambda api, D: D.range(7).batch(3).padded_batch(2, padded_shapes=[5], drop_remainder=True),
    "unbatch_batch_G5": lambda api, D: D.range(8).batch(3).unbatch().batch(5),
    "from_tensors_repeat": lambda api, D: D.from_tensors(np.arange(6)).repeat(2),
    "from_tensors_matrix": lambda api, D: D.from_tensors(np.arange(12, dtype=np.float32).reshape(4, 3)),
    "slices_vectors": lambda api, D: D.from_tensor_slices(np.arange(12).reshape(4, 3)),
    "cache_G3": lambda api, D: D.range(7).batch(3).cache(),
    "prefetch_G4": lambda api, D: D.range(6).batch(4).prefetch(2),
    "repeat_take_G3": lambda api, D: D.range(5).batch(3).repeat().take(3),
    "take_neg_G4": lambda api, D: D.range(6).take(-1).batch(4),
    "skip_G4": lambda api, D: D.range(10).skip(3).batch(4),
    "shard_G2": lambda api, D: D.range(10).shard(3, 1).batch(2),
    "interleave_G4": lambda api, D: D.range(3).interleave(lambda x: D.range(x * 10, x * 10 + 3), cycle_length=2,
                                                           block_length=2).batch(4),
    "flat_map_G3": lambda api, D: D.range(3).flat_map(lambda x: D.range(x * 10, x * 10 + 2)).batch(3),
    "map_tuple_G3": lambda api, D: D.range(7).map(lambda x: [x, x * 3]).batch(3),
    "text_strings_G2": lambda api, D: api.data.TextLineDataset(text_files()[:2]).batch(2),
    "text_strings_G3_DATA": lambda api, D: with_policy(api, api.data.TextLineDataset(text_files()[:3]).batch(3),
                                                       "DATA"),
    "list_files_G3_DATA": lambda api, D: with_policy(api, D.list_files(text_files()[:3], shuffle=False).interleave(
        api.data.TextLineDataset, cycle_length=1).map(api.parse_int64).batch(3), "DATA"),
    "list_files_G3_AUTO": lambda api, D: D.list_files(text_files()[:4], shuffle=False).interleave(
        api.data.TextLineDataset, cycle_length=1).map(api.parse_int64).batch(3),
    "options_merge_OFF": lambda api, D: with_policy(api, D.range(7).batch(3), "OFF").with_options(api.data.Options()),
    "options_merge_DATA_OFF": lambda api, D: with_policy(api, with_policy(api, D.range(7).batch(3), "DATA"), "OFF"),
    "hint_range7_G3": lambda api, D: with_policy(api, D.range(7).shard(*[api.data.experimental.SHARD_HINT] * 2)
                                                 .batch(3), "HINT"),
    "hint_range8_G3": lambda api, D: with_policy(api, D.range(8).shard(*[api.data.experimental.SHARD_HINT] * 2)
                                                 .batch(3), "HINT"),
    "hint_unsharded_G3": lambda api, D: with_policy(api, D.range(8).batch(3), "HINT"),
    "rebatch_drop_G4": lambda api, D: D.range(9).batch(4).rebatch(2, drop_remainder=True),
    "rebatch_static_G4": lambda api, D: D.range(9).batch(4, drop_remainder=True).rebatch(2),
    "rebatch_scalars": lambda api, D: D.range(5).rebatch(2),
    "rebatch_scalars_drop": lambda api, D: D.range(5).rebatch(2, drop_remainder=True),
    "rebatch_mixed_batch_dims": lambda api, D: D.zip((D.range(8).batch(4, drop_remainder=True),
                                                      D.range(12).batch(6, drop_remainder=True))).rebatch([2, 2]),
    "rebatch_other_inner_shapes": lambda api, D: D.range(8).batch(5).batch(1).rebatch(4),
    "take_neg5_G5": lambda api, D: D.range(11).take(-5).batch(5),
    "take_neg5_G4": lambda api, D: D.range(11).take(-5).batch(4),
    # cardinality 0 by TF's arithmetic on take(-3) (1 batch -> -3 -> unbatch -12 -> batch(9) 0), yet one step of data
    "take_neg3_unbatch_G9": lambda api, D: D.range(4).batch(4, drop_remainder=True).take(-3).unbatch().batch(9),
    # no data: the map's spec comes from tracing, its unknown dimensions stay unknown
    "range0_G3_G2_map": lambda api, D: D.range(0).batch(3).batch(2).map(lambda x: x * 2),
    "random_G3": lambda api, D: D.random(seed=5).take(7).batch(3),
    "sample_G3": lambda api, D: D.sample_from_datasets([D.range(6), D.range(100, 104)], weights=[0.4, 0.6],
                                                       seed=17).batch(3),
    "choose_G2": lambda api, D: D.choose_from_datasets([D.range(3), D.range(10, 12)],
                                                       D.range(2).repeat(), stop_on_empty_dataset=False).batch(2),
    # a declared cardinality: DATA sharding keeps it, FILE sharding drops it (a worker reads only its files)
    "assert_card_G3": lambda api, D: D.range(10).filter(lambda x: x >= 0).apply(
        api.data.experimental.assert_cardinality(10)).batch(3),
    "assert_card_text_G3_AUTO": lambda api, D: api.data.TextLineDataset(text_files()).apply(
        api.data.experimental.assert_cardinality(17)).batch(3),
    "from_list_G2": lambda api, D: api.data.experimental.from_list([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]).batch(2),
    "map_and_batch_G3": lambda api, D: D.range(8).apply(api.data.experimental.map_and_batch(lambda x: x * 3, 3)),
}

USE_PIPELINES: dict[str, tuple[str, ...]] = {
    "described": tuple(PIPELINES),
    "twice": ("range9_G3", "range9_G3_OFF", "cache_G3", "strings_G2", "range7_G4_drop_repeat", "hint_range7_G3",
              "hint_range8_G3", "hint_unsharded_G3", "sample_G3"),
    "next": ("range5_G4", "range9_G3_drop", "range0_G4", "dict_G3"),
    "optional": ("range5_G4", "range9_G3_OFF", "range0_G4", "nested_G4", "take_neg3_unbatch_G9",
                 "range7_G4_drop_repeat"),
    "reduce": ("range5_G4", "range9_G3", "range9_G3_OFF", "zip_G4"),
}


def _use_case(use: str, pipeline: str) -> Callable[[Any, Any], Result]:
    build = PIPELINES[pipeline]
    return lambda api, s: USES[use](api, s, lambda: s.experimental_distribute_dataset(build(api, api.data.Dataset)))


for _use, _names in USE_PIPELINES.items():
    for _name in _names:
        add(f"use_{_use}_{_name}", f"use_{_use}", _use_case(_use, _name))


# -- input options and input functions ---------------------------------------------------------------------


def _with_options(**kwargs: Any) -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """experimental_distribute_dataset(range(5).batch(4), options=InputOptions(**kwargs)) and the options'
        fields."""
        named = {key: getattr(api.InputReplicationMode, value) if key == "experimental_replication_mode" else value
                 for key, value in kwargs.items()}
        options = api.InputOptions(**named)
        result = iterate(api, s, lambda: s.experimental_distribute_dataset(api.data.Dataset.range(5).batch(4),
                                                                           options=options))
        result["options"] = [options.experimental_fetch_to_device, options.experimental_place_dataset_on_device,
                             options.experimental_per_replica_buffer_size]
        return result
    return fn


INPUT_OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "fetch_false": {"experimental_fetch_to_device": False},
    "buffer0": {"experimental_per_replica_buffer_size": 0},
    "per_replica": {"experimental_replication_mode": "PER_REPLICA"},
}
for _name, _kwargs in INPUT_OPTIONS.items():
    add(f"input_options_{_name}", "input_options", _with_options(**_kwargs))


def _from_function(make: Callable[[Any, Any], Any], options: dict[str, Any] | None = None,
                   use: str = "described") -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """distribute_datasets_from_function(lambda ctx: make(api, ctx)), described and iterated."""
        contexts: list[Any] = []

        def dataset_fn(ctx: Any) -> Any:
            """The pipeline ``make`` builds for this InputContext."""
            contexts.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync])
            return make(api, ctx)

        kwargs = {} if options is None else {"options": api.InputOptions(**options)}
        result = USES[use](api, s, lambda: s.distribute_datasets_from_function(dataset_fn, **kwargs))
        result["input_contexts"] = contexts
        return result
    return fn


FROM_FUNCTION: dict[str, Callable[[Any, Any], Any]] = {
    "unbatched": lambda api, ctx: api.data.Dataset.range(5),
    "batch3": lambda api, ctx: api.data.Dataset.range(7).batch(3),
    "batch3_drop": lambda api, ctx: api.data.Dataset.range(7).batch(3, drop_remainder=True),
    "batch2_drop_shard": lambda api, ctx: api.data.Dataset.range(11).shard(
        ctx.num_input_pipelines, ctx.input_pipeline_id).batch(2, drop_remainder=True),
    "dict": lambda api, ctx: api.data.Dataset.from_tensor_slices(
        {"a": np.arange(5), "b": np.arange(5) * 0.5}).batch(ctx.get_per_replica_batch_size(4)),
    "strings": lambda api, ctx: api.data.Dataset.from_tensor_slices(["x", "yy", "zzz"]).batch(2),
    "repeat": lambda api, ctx: api.data.Dataset.range(3).batch(2).repeat(),
    "per_replica_batch_5": lambda api, ctx: api.data.Dataset.range(6).batch(ctx.get_per_replica_batch_size(5)),
    "per_replica_batch_float": lambda api, ctx: api.data.Dataset.range(6).batch(ctx.get_per_replica_batch_size(4.0)),
    "per_replica_batch_0": lambda api, ctx: api.data.Dataset.range(6).batch(
        max(1, ctx.get_per_replica_batch_size(0))),
    "not_a_dataset": lambda api, ctx: [1, 2, 3],
    "rebatch_static_first_dim": lambda api, ctx: api.data.Dataset.range(4).batch(6).batch(6).rebatch(
        1, drop_remainder=True),
}
for _name, _make in FROM_FUNCTION.items():
    add(f"from_function_{_name}", "from_function_variants", _from_function(_make))
add("from_function_next_unbatched", "from_function_variants", _from_function(FROM_FUNCTION["unbatched"],
                                                                              use="next"))
add("from_function_optional_batch3", "from_function_variants", _from_function(FROM_FUNCTION["batch3"],
                                                                               use="optional"))
add("from_function_optional_unbatched", "from_function_variants", _from_function(FROM_FUNCTION["unbatched"],
                                                                                 use="optional"))
add("from_function_place_on_device", "from_function_variants",
    _from_function(FROM_FUNCTION["batch3"], {"experimental_place_dataset_on_device": True}))
add("from_function_place_on_host", "from_function_variants",
    _from_function(FROM_FUNCTION["batch3"], {"experimental_place_dataset_on_device": True,
                                             "experimental_fetch_to_device": False}))
add("from_function_fetch_false", "from_function_variants",
    _from_function(FROM_FUNCTION["batch3"], {"experimental_fetch_to_device": False}))



# -- nn.compute_average_loss on the per-replica batches ---------------------------------------------------------

# name -> (dtype of the losses, sample weights: None, "vector" or "column", global_batch_size or None)
AVERAGE_LOSSES: dict[str, tuple[str, str | None, int | None]] = {
    "float32": ("float32", None, 8),
    "float32_no_global_batch": ("float32", None, None),
    "float32_weights": ("float32", "vector", 8),
    "float32_column_weights": ("float32", "column", 8),
    "float64_weights": ("float64", "vector", 8),       # TF multiplies in float32
    "int64_weights": ("int64", "vector", 11),          # float32 products truncated back to int64
    "int32": ("int32", None, 8),
    "negative_global_batch": ("float32", None, -1),
}


def _average_loss_case(dtype: str, weights: str | None, global_batch: int | None) -> Callable[[Any, Any], Result]:
    def fn(api: Any, s: Any) -> Result:
        """``range(11).batch(8)`` distributed (the last step uneven, or empty on a replica): losses x / 3 (x * 3
        for integers), weights (x % 3) * 0.35, averaged per replica and summed across replicas."""
        def step(x: Any) -> Any:
            losses = api.cast(x, dtype) * 3 if "int" in dtype else api.cast(x, dtype) / 3.0
            w = None if weights is None else api.cast(x % 3, "float32") * 0.35
            w = w[:, None] if weights == "column" else w
            return api.nn.compute_average_loss(losses, sample_weight=w, global_batch_size=global_batch)

        steps = []
        for element in s.experimental_distribute_dataset(api.data.Dataset.range(11).batch(8)):
            per_replica = attempt(lambda element=element: s.run(step, args=(element,)))
            total = per_replica if isinstance(per_replica, Exception) else attempt(
                lambda per_replica=per_replica: s.reduce(api.ReduceOp.SUM, per_replica, axis=None))
            steps.append({"per_replica": per_replica, "sum": total})
        return {"steps": steps}
    return fn


for _name, (_dtype, _weights, _global) in AVERAGE_LOSSES.items():
    add(f"average_loss_{_name}", "average_loss", _average_loss_case(_dtype, _weights, _global))


def _scalar_losses(api: Any, s: Any) -> Result:
    """Per-replica losses of rank 0 raise TF's ValueError naming the value."""
    return {f"{name}": attempt(lambda value=value: s.run(lambda: api.nn.compute_average_loss(value,
                                                                                             global_batch_size=2)))
            for name, value in (("float", api.constant(1.5)), ("int", api.constant(2)),
                                ("float32_third", api.constant(1 / 3)))}


add("average_loss_scalar_losses", "average_loss", _scalar_losses)
