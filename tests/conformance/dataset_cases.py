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
  (FILE sharding moves the file shuffle after the shard).
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
