"""Random sequences over the checkpoint API for fuzz_against_tf.py, run in the setup's strategy (A, B, M1): a tree of
trackables (variables of every kind, nested Checkpoints, dicts, lists, Keras models with optimizers whose slots exist
or have trained, ``Checkpoint(root=...)``), then random steps: assign, attach (new objects, or held ones under a
second name), hand-written state files, save/write, restore/read into the same
objects or a changed tree (missing, extra, late-attached, other dtype or shape, built later) with the status checks,
CheckpointManager (max_to_keep, keep_checkpoint_every_n_hours, names, step counters and intervals, numbers,
restore_or_initialize), latest_checkpoint, get_checkpoint_state, list_variables, load_variable, load_checkpoint's
reader, deleting a checkpoint's files, and the directory's checkpoint prefixes and state file. Each step records its
result or error (class and first line, the case directory spelled ``<dir>``); the sequence goes on after an error.
Specs are JSON (see fuzz_datasets.py); fuzz_checkpoint_steps.py runs them."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from .fuzz_checkpoint_steps import build

__all__ = ["build", "generate", "shrink"]

Spec = dict[str, Any]
Node = list[Any]
NAMES = ("a", "b", "c", "v", "w", "net", "opt", "x/y", "x.y")
KINDS = ("plain", "plain", "plain", "mirrored", "mirrored", "mirrored", "on_read_sum", "on_read_sum", "on_read_mean",
         "on_read_first", "on_read_none")
NUMERIC = ("float32", "float32", "float64", "int32", "int64")
FLOATS = ("float32", "float64")
SHAPES = ([], [], [2], [3], [2, 2])
OPTIMIZERS = (None, "sgd", "adam", "rmsprop")
MODEL_STATES = ("unbuilt", "built", "slots", "trained")
CHECKS = ("assert_consumed", "assert_existing_objects_matched", "assert_nontrivial_match", "expect_partial")
PREFIXES = ("ckpt", "ckpt", "sub/ckpt", "other")
MAX_STEPS = 10
STATE_FILES = ("garbage", "no_latest", "other", "absolute_missing", "paths_only")  # see fuzz_checkpoint_steps


# -- trees ------------------------------------------------------------------------------------------------


def _var(rng: random.Random) -> Node:
    """A random variable: dtype, shape and kind (plain: outside the scope; the others in it)."""
    kind = rng.choice(KINDS)
    return ["var", rng.choice(_dtypes(kind)), rng.choice(SHAPES), kind]


def _dtypes(kind: str) -> tuple[str, ...]:
    """The dtypes a variable of ``kind`` can have (TF refuses integer ON_READ MEAN variables; strings and bools
    cannot be aggregated)."""
    return {"plain": NUMERIC + ("bool", "string", "float16", "int8", "uint16"), "mirrored": NUMERIC + ("bool",),
            "on_read_mean": FLOATS}.get(kind, NUMERIC)


def _model(rng: random.Random) -> Node:
    """A Keras Sequential of Dense layers on 3 inputs, compiled with an optimizer or not, in some state."""
    optimizer = rng.choice(OPTIMIZERS)
    states = MODEL_STATES if optimizer else MODEL_STATES[:2]
    return ["model", [rng.randint(1, 3) for _ in range(rng.randint(1, 2))], optimizer, rng.choice(states)]


def _children(rng: random.Random, depth: int, most: int) -> dict[str, Node]:
    """Up to ``most`` named children."""
    return {rng.choice(NAMES): _node(rng, depth + 1) for _ in range(rng.randint(0, most))}


def _node(rng: random.Random, depth: int) -> Node:
    """A random trackable: mostly variables; containers and models above depth 2."""
    draw = rng.random()
    if depth >= 2 or draw < 0.55:
        return _var(rng)
    if draw < 0.7:
        return ["ckpt", _children(rng, depth, 3), None]
    if draw < 0.8:
        return ["dict", _children(rng, depth, 3)]
    if draw < 0.9:
        return ["list", [_node(rng, depth + 1) for _ in range(rng.randint(0, 3))]]
    return _model(rng)


def _tree(rng: random.Random) -> Node:
    """The root Checkpoint: keyword arguments, sometimes a ``root`` object."""
    root = ["ckpt", _children(rng, 1, 3), None] if rng.random() < 0.15 else None
    return _apart(["ckpt", {rng.choice(NAMES): _node(rng, 0) for _ in range(rng.randint(1, 4))}, root])


def _apart(node: Node) -> Node:
    """``node`` without the ``root`` object's children that a keyword argument also names (TF compares the two
    with ``!=`` then, an accident: an elementwise comparison of variables)."""
    if node[2] is not None:
        node[2][1] = {name: child for name, child in node[2][1].items() if name not in node[1]}
    return node


def _changed_var(rng: random.Random, node: Node) -> Node:
    """``node`` with another dtype, shape or kind."""
    _, dtype, shape, kind = node
    what = rng.choice(("dtype", "shape", "kind"))
    if what == "dtype":
        return ["var", rng.choice(_dtypes(kind)), shape, kind]
    if what == "shape":
        return ["var", dtype, rng.choice(SHAPES), kind]
    return ["var", dtype, shape, rng.choice([k for k in KINDS if dtype in _dtypes(k)])]


def _mutated(rng: random.Random, node: Node, rate: float) -> Node:
    """A copy of ``node`` with random changes at rate ``rate``: entries dropped, added, renamed, variables changed,
    models of other widths or states."""
    node = copy.deepcopy(node)
    tag = node[0]
    if tag == "var":
        return _changed_var(rng, node) if rng.random() < rate else node
    if tag == "model":
        if rng.random() < rate:
            node[1] = [units + rng.choice((0, 1)) for units in node[1]]
        if rng.random() < rate:
            node[3] = rng.choice(MODEL_STATES if node[2] else MODEL_STATES[:2])
        return node
    if tag == "list":
        items = [_mutated(rng, item, rate) for item in node[1]]
        if items and rng.random() < rate:
            items.pop()
        if rng.random() < rate:
            items.append(_var(rng))
        return ["list", items]
    children = {name: _mutated(rng, child, rate) for name, child in node[1].items()}
    for name in list(children):
        if rng.random() < rate / 2:
            children.pop(name)
    if rng.random() < rate:
        children[rng.choice(NAMES)] = _node(rng, 1)
    if tag == "dict":
        return ["dict", children]
    root = node[2] if node[2] is None or rng.random() > rate else None
    return _apart(["ckpt", children, None if root is None else _mutated(rng, root, rate)])


def _target(rng: random.Random, tree: Node) -> tuple[Any, list[list[str]]]:
    """What a restore goes into: ``"self"`` (the saving objects) or a changed copy of the tree, and the actions after
    the restore: late attributes, models built and optimizer slots made later."""
    if rng.random() < 0.25:
        return "self", []
    target = _mutated(rng, tree, rng.choice((0.0, 0.0, 0.1, 0.3)))
    late = []
    for name, child in target[1].items():
        if rng.random() < 0.25:
            late.append(["attach", name])
        if child[0] == "model" and child[3] == "unbuilt" and rng.random() < 0.7:
            late.append(["build", name])
        if child[0] == "model" and child[2] and child[3] in ("unbuilt", "built") and rng.random() < 0.5:
            late.append(["slots", name])
    rng.shuffle(late)
    return target, late


# -- steps ------------------------------------------------------------------------------------------------


def _source(rng: random.Random, readers: bool = False) -> list[Any]:
    """Which checkpoint a step reads: one returned earlier (by index), the directory's latest, a missing or bare
    prefix, the directory itself, or None (restores only)."""
    choices = ["path", "path", "path", "latest", "missing", "bare", "dir"] + ([] if readers else ["none"])
    kind = rng.choice(choices)
    if kind == "path":
        return ["path", rng.randint(-3, 3)]
    if kind == "latest":
        return ["latest", rng.choice(("", "", "sub", "m"))]
    return [kind]


def _manager(rng: random.Random) -> list[Any]:
    """A CheckpointManager's arguments (some invalid: max_to_keep 0 or -1, an interval without a step counter)."""
    step = rng.choice((None, None, "int64", "int32"))
    interval = rng.choice((None, None, 1, 2, 3)) if step or rng.random() < 0.1 else None
    return ["manager", {"dir": rng.choice(("", "m", "m")), "max_to_keep": rng.choice((None, 1, 2, 2, 3, 0, -1)),
                        "keep_hours": rng.choice((None, None, 1e-12, 1000.0)),
                        "name": rng.choice(("ckpt", "ckpt", "model", "sub/model")), "step": step,
                        "interval": interval, "init": rng.random() < 0.5,
                        "last_step": rng.choice((None, None, 0, 4)) if interval else None}]


def _restore(rng: random.Random, tree: Node) -> list[Any]:
    """A restore or read of some checkpoint into a target, with status checks before and after the late actions."""
    target, late = _target(rng, tree)
    checks = rng.sample(CHECKS, rng.randint(1, 4))
    return ["restore", rng.choice(("restore", "restore", "read")), _source(rng), target, late, checks,
            rng.random() < 0.5]


def _step(rng: random.Random, state: dict[str, Any]) -> list[Any]:
    """One random step; ``state`` follows the tree (attach) and whether a manager exists."""
    kinds = ["save", "save", "save", "write", "assign", "assign", "assign_replicas", "attach", "alias", "counter",
             "train", "restore", "restore", "restore", "manager", "manager_info", "latest", "state", "list_variables",
             "load_variable", "load_variable", "reader", "files", "files", "delete", "restore_or_initialize",
             "state_file"]
    if state["manager"]:
        kinds += ["manager_save"] * 4
    kind = rng.choice(kinds)
    if kind == "save":
        return ["save", rng.choice(PREFIXES)]
    if kind == "write":
        return ["write", rng.choice(("w", "sub/w", "ckpt-7", "ckpt"))]
    if kind in ("assign", "assign_replicas"):
        state["gen"] += 1
        return [kind, state["gen"]]
    if kind == "attach":
        root = state["tree"][2]
        name = rng.choice([n for n in NAMES if root is None or n not in root[1]])
        node = _node(rng, 0) if rng.random() < 0.9 else ["value", 3]
        if node[0] != "value":
            state["tree"][1][name] = node
        return ["attach", name, node]
    if kind == "alias":
        if not state["tree"][1]:
            return ["counter"]
        root = state["tree"][2]
        name = rng.choice([n for n in NAMES if root is None or n not in root[1]])
        existing = rng.choice(sorted(state["tree"][1]))
        if state["tree"][1][existing][0] == "model" and state["tree"][1][existing][2] and rng.random() < 0.5:
            return ["alias", name, existing, "optimizer"]  # the model's optimizer beside it (not in the tree)
        state["tree"][1][name] = state["tree"][1][existing]
        return ["alias", name, existing, None]
    if kind == "restore":
        return _restore(rng, state["tree"])
    if kind == "manager":
        state["manager"] = True
        return _manager(rng)
    if kind == "manager_save":
        number = rng.choice((None, None, None, 1, 5, ["var", 9]))
        return ["manager_save", number, rng.random() < 0.8, rng.randint(0, 8)]
    if kind == "restore_or_initialize":
        target, late = _target(rng, state["tree"])
        return ["restore_or_initialize", "self" if target == "self" else target, late]
    if kind in ("latest", "state"):
        return [kind, rng.choice(("", "", "sub", "m")), rng.choice((None, None, "other"))]
    if kind in ("list_variables", "reader"):
        return [kind, _source(rng, readers=True)]
    if kind == "load_variable":
        return ["load_variable", _source(rng, readers=True), rng.choice(("key", "key", "key", "colon", "bare",
                                                                          "missing", "graph")), rng.randint(0, 6)]
    if kind == "state_file":
        return ["state_file", rng.choice(("", "", "m")), rng.choice(STATE_FILES)]
    if kind == "delete":
        return ["delete", _source(rng, readers=True)]
    return [kind]


def generate(rng: random.Random) -> Spec:
    """A random checkpoint-API sequence (it starts by saving or making a manager, most of the time)."""
    tree = _tree(rng)
    state = {"tree": copy.deepcopy(tree), "manager": False, "gen": 0}
    first = rng.choice((["save", "ckpt"], ["save", "ckpt"], _manager(rng), None))
    steps = [] if first is None else [first]
    state["manager"] = first is not None and first[0] == "manager"
    steps += [_step(rng, state) for _ in range(rng.randint(2, MAX_STEPS))]
    return {"area": "checkpoint_api", "tree": tree, "steps": steps}


def shrink(spec: Spec) -> Iterator[Spec]:
    """Fewer steps, fewer top-level objects, restores into the saving objects and without late actions."""
    steps = spec["steps"]
    for i in range(len(steps)):
        if len(steps) > 1:
            yield {**spec, "steps": steps[:i] + steps[i + 1:]}
    children = spec["tree"][1]
    for name in children:
        if len(children) > 1:
            yield {**spec, "tree": ["ckpt", {k: v for k, v in children.items() if k != name}, spec["tree"][2]]}
    if spec["tree"][2] is not None:
        yield {**spec, "tree": ["ckpt", children, None]}
    for i, step in enumerate(steps):
        if step[0] == "restore" and step[3] != "self":
            yield {**spec, "steps": steps[:i] + [[*step[:3], "self", [], *step[5:]]] + steps[i + 1:]}
        late = {"restore": 4, "restore_or_initialize": 2}.get(step[0])
        if late is not None and step[late]:
            yield {**spec, "steps": steps[:i] + [[*step[:late], [], *step[late + 1:]]] + steps[i + 1:]}
