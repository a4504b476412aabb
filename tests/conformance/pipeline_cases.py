"""Input-pipeline conformance cases: what a ``tf.data``-style pipeline yields, iterated several times in one
process (no strategy). Each case is a JSON spec (a source and a list of transformations) built the same way on
``tf.data`` and on ``mirrorlab.data``, so the recorded TF result (``golden/pipelines.json``, written by
record_pipeline_golden.py) is compared with mirrorlab's without TensorFlow.

The cases are drawn at random from a fixed seed (``pipeline_specs``): seeded shuffles (both reshuffle modes),
repeat (finite, forever under ``take``), batch (with and without ``drop_remainder``), unbatch, map, filter, take,
skip, shard, cache, prefetch, the optimization options that change how many seeds a shuffle draws, and a final
zip, concatenate (with a second copy of the pipeline) or enumerate. A case records the cardinality and every element of each of its iterations, or the error that ended one.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

__all__ = ["pipeline_specs", "build", "run_spec", "SPEC_SEED", "SPEC_COUNT"]

SPEC_SEED = 20261123
SPEC_COUNT = 400
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


def _keep(x: Any) -> Any:
    return x % 3 != 1


def build(data: Any, spec: Spec) -> Any:
    """The dataset of ``spec`` built with ``data`` (``tf.data`` or ``mirrorlab.data``)."""
    kind, n = spec["source"]
    if kind == "range":
        ds = data.Dataset.range(n)
    else:
        ds = data.Dataset.from_tensor_slices(np.arange(n, dtype=np.float32) * 10)
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


def _element(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_element(v) for v in value]
    array = np.asarray(value)
    return {"dtype": array.dtype.name, "shape": list(array.shape), "value": array.tolist()}


def run_spec(data: Any, spec: Spec, cardinality: Any) -> dict[str, Any]:
    """``{"cardinality", "iterations": [[element, ...] | {"error": ...}, ...]}`` for ``spec``."""
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
    return {"cardinality": int(cardinality(ds)), "iterations": iterations}
