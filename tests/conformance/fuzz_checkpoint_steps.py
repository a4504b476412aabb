"""Running fuzz_checkpoint_api.py's specs against ``api`` (adapters.py) in a strategy: the tree of trackables is
built, then every step records its result; paths and errors are made comparable between TF and mirrorlab (the case
directory spelled ``<dir>``, variable reprs as checkpoint_cases.scrub writes them, checkpoint files as prefixes)."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .cases import components, numpy_dtype
from .checkpoint_cases import files, scrub, state

__all__ = ["build"]

Spec = dict[str, Any]
Node = list[Any]
PREFIX = "fuzzckptapi-"
SYNCS = {"on_read_sum": "SUM", "on_read_mean": "MEAN", "on_read_first": "ONLY_FIRST_REPLICA", "on_read_none": "NONE"}
CHECKPOINT_FILE = re.compile(r"^(.*?)(\.index|\.data-\d{5}-of-\d{5}|\.npz|\.index\.json)$")
GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
UNMATCHED = re.compile(r"(unmatched objects: \[|no matching checkpointed value: \[).*")
COUNT = re.compile(r"Found (\d+) Python objects")
ASSIGN_SHAPE = ("The shape of the target variable", "Cannot assign value to variable")  # Keras 3's, a variable's
INPUTS = 3  # a model's input width


def value(dtype: str, shape: list[int], seed: int) -> Any:
    """``arange + seed`` of ``shape`` in ``dtype`` (bool: the odd ones; string: ``b"s<n>"``, as nested lists)."""
    size = int(np.prod(shape)) if shape else 1
    numbers = np.arange(size).reshape(shape) + seed
    if dtype == "bool":
        return numbers % 2 == 1
    if dtype == "string":
        return np.vectorize(lambda n: f"s{n}".encode(), otypes=[object])(numbers).tolist()
    return numbers.astype(dtype)


def _keras(api: Any) -> Any:
    """The Keras module of ``api``'s framework (Keras 3 beside TF, mirrorlab.tf.keras)."""
    if api.framework == "tensorflow":
        import keras
        return keras
    import mirrorlab.tf.keras
    return mirrorlab.tf.keras


class _Model:
    """A Keras model of a spec: the model, its optimizer (or None) and how to read them."""

    def __init__(self, run: "Run", node: Node, name: str) -> None:
        _, units, optimizer, how = node
        k, s = run.keras, run.s
        self.run = run
        self.built = how != "unbuilt"
        with s.scope():
            layers = [k.layers.Dense(n, kernel_initializer="ones", name=f"{name}_d{i}") for i, n in enumerate(units)]
            self.model = k.Sequential(([k.Input((INPUTS,))] if how != "unbuilt" else []) + layers, name=name)
            self.optimizer = None
            if optimizer:
                made = {"sgd": lambda: k.optimizers.SGD(0.1, momentum=0.5), "adam": lambda: k.optimizers.Adam(0.1),
                        "rmsprop": lambda: k.optimizers.RMSprop(0.1)}[optimizer]
                self.optimizer = made()
                self.model.compile(optimizer=self.optimizer, loss="mse")
        if how in ("slots", "trained"):
            self.slots()
        if how == "trained":
            self.train()

    def build(self) -> None:
        """Call the model once in the strategy's scope, creating its weights there (outside it TF makes them
        plain variables, which the optimizer's slots then refuse; mirrorlab builds in the model's strategy)."""
        with self.run.s.scope():
            self.model(np.ones((1, INPUTS), np.float32))
        self.built = True

    def slots(self) -> None:
        """Make the optimizer's slots (in the strategy's scope)."""
        with self.run.s.scope():
            self.optimizer.build(self.model.trainable_variables)

    def train(self) -> None:
        """One optimizer step in every replica with gradients of ones times (replica + 1)."""
        api, s = self.run.api, self.run.s
        variables = self.model.trainable_variables

        def step() -> None:
            scale = float(int(api.get_replica_context().replica_id_in_sync_group) + 1)
            grads = [api.constant(np.ones(tuple(v.shape), np.float32) * scale) for v in variables]
            self.optimizer.apply_gradients(zip(grads, variables))
        s.run(step)

    def read(self) -> dict[str, Any]:
        """The model's weights and the optimizer's variables."""
        result = {"weights": [np.asarray(w) for w in self.model.get_weights()]}
        if self.optimizer is not None:
            result["optimizer"] = [np.asarray(v.numpy()) for v in self.optimizer.variables]
        return result


class Run:
    """One spec's objects and books while its steps run."""

    def __init__(self, api: Any, s: Any, directory: Path) -> None:
        self.api, self.s, self.dir = api, s, directory
        self.keras = _keras(api)
        self.leaves: dict[str, Any] = {}   # path -> variable or _Model, for reading values
        self.seed = 0
        self.paths: list[Any] = []
        self.manager: Any = None
        self.manager_args: dict[str, Any] = {}
        self.step_counter: Any = None  # the last manager's made
        self.manager_step: Any = None  # the saving manager's
        self.calls: list[str] = []
        self.root: Any = None

    # -- objects ------------------------------------------------------------------------------------------

    def make(self, node: Node, path: str, leaves: dict[str, Any]) -> Any:
        """The object of ``node`` (its variables and models recorded in ``leaves`` under ``path``)."""
        tag = node[0]
        if tag == "var":
            var = self.variable(node)
            leaves[path] = var
            return var
        if tag == "model":
            model = _Model(self, node, f"m{len(leaves)}")
            leaves[path] = model
            return model.model
        if tag == "value":
            return node[1]
        if tag == "list":
            return [self.make(child, f"{path}/{i}", leaves) for i, child in enumerate(node[1])]
        children = {name: self.make(child, f"{path}/{name}", leaves) for name, child in node[1].items()}
        if tag == "dict":
            return children
        root = None if node[2] is None else self.make(node[2], f"{path}/root", leaves)
        return self.api.train.Checkpoint(root=root, **children) if root is not None else \
            self.api.train.Checkpoint(**children)

    def variable(self, node: Node) -> Any:
        """A variable of ``node``'s dtype, shape and kind, valued by the next seed."""
        _, dtype, shape, kind = node
        self.seed += 1
        initial = value(dtype, shape, self.seed * 10)
        api = self.api
        if kind == "plain":
            return api.Variable(initial)
        sync = api.VariableSynchronization.ON_READ if kind in SYNCS else api.VariableSynchronization.AUTO
        aggregation = getattr(api.VariableAggregation, SYNCS.get(kind, "NONE"))
        with self.s.scope():
            return api.Variable(api.constant(initial), synchronization=sync, aggregation=aggregation)

    def read(self, leaves: dict[str, Any]) -> dict[str, Any]:
        """Every variable's local components and every model's weights."""
        return {path: outcome(lambda leaf=leaf: leaf.read() if isinstance(leaf, _Model) else
                              [_array(c) for c in components(self.s, leaf)], self.dir) for path, leaf in leaves.items()}

    def where(self, source: list[Any]) -> Any:
        """The checkpoint path a step names (see fuzz_checkpoint_api._source)."""
        kind = source[0]
        if kind == "path":
            return self.paths[source[1] % len(self.paths)] if self.paths else str(self.dir / "nothing-1")
        if kind == "latest":
            return self.api.train.latest_checkpoint(str(self.dir / source[1]))
        return {"missing": str(self.dir / "nothing-1"), "bare": str(self.dir / "ckpt"), "dir": str(self.dir),
                "none": None}[kind]

    def shown(self, path: Any) -> Any:
        """A returned path with the case directory as ``<dir>`` (its type's name if it is no str)."""
        if path is None:
            return None
        if not isinstance(path, str):
            return f"<{type(path).__name__}>"
        return path.replace(str(self.dir), "<dir>")

    def track(self, path: Any) -> Any:
        """Remember a returned checkpoint path; the path as shown."""
        if isinstance(path, str):
            self.paths.append(path)
        return self.shown(path)

    # -- steps --------------------------------------------------------------------------------------------

    def assign(self, gen: int) -> None:
        """Assign every variable a new value in cross-replica context."""
        for var in self.leaves.values():
            if not isinstance(var, _Model):
                dtype = numpy_dtype(var.dtype)
                var.assign(value("string", list(var.shape), gen * 100) if dtype == "object" else
                           self.api.constant(value(dtype, list(var.shape), gen * 100)))

    def assign_replicas(self, gen: int) -> None:
        """In every replica, assign each ON_READ variable a value of its own (+ the replica id)."""
        api = self.api
        on_read = [v for v in self.leaves.values() if not isinstance(v, _Model)
                   and v.synchronization == api.VariableSynchronization.ON_READ]

        def body() -> None:
            replica = int(api.get_replica_context().replica_id_in_sync_group)
            for var in on_read:
                var.assign(api.constant(value(var.dtype.name, list(var.shape), gen * 100 + replica)))
        self.s.run(body)

    def attach(self, name: str, node: Node) -> None:
        """Attach a new object to the saving checkpoint."""
        self.leaves = {k: v for k, v in self.leaves.items() if not k.startswith(f"/{name}/") and k != f"/{name}"}
        setattr(self.root, name, self.make(node, f"/{name}", self.leaves))

    def alias(self, name: str, existing: str, part: str | None) -> None:
        """Attach an object the saving checkpoint holds (or that model's optimizer) under a second name (its values
        are saved under their first path)."""
        found = getattr(self.root, existing)
        setattr(self.root, name, getattr(found, part) if part else found)

    def state_file(self, sub: str, kind: str) -> None:
        """Write a ``checkpoint`` state file by hand: unparsable, without a latest checkpoint, naming another
        prefix, an absolute missing one, or listing paths only."""
        text = {"garbage": "this is { not a proto\n", "no_latest": 'all_model_checkpoint_paths: "ckpt-1"\n',
                "other": 'model_checkpoint_path: "other-1"\nall_model_checkpoint_paths: "other-1"\n',
                "absolute_missing": f'model_checkpoint_path: "{self.dir / "gone-3"}"\n',
                "paths_only": 'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-1"\n'
                              'all_model_checkpoint_paths: "ckpt-2"\n'}[kind]
        (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / sub / "checkpoint").write_text(text)

    def train(self) -> None:
        """One optimizer step of every model with an optimizer."""
        for leaf in self.leaves.values():
            if isinstance(leaf, _Model) and leaf.optimizer is not None and leaf.built:
                leaf.train()

    def restore(self, method: str, source: list[Any], target: Any, late: list[list[str]], checks: list[str],
                counter: bool) -> dict[str, Any]:
        """Restore or read a checkpoint into the saving objects or a fresh target tree; the status, its checks
        before and after the late actions, and every value."""
        path = outcome(lambda: self.where(source), self.dir)
        if isinstance(path, Exception):
            return {"where": path}
        if target == "self":
            ckpt, leaves, pending = self.root, self.leaves, {}
        else:
            ckpt, leaves, pending = self.target(target, late)
        status = outcome(lambda: getattr(ckpt, method)(path), self.dir)
        if str(status).startswith(ASSIGN_SHAPE) and any(isinstance(leaf, _Model) for leaf in leaves.values()):
            status = type(status)("")  # a weight of another shape: Keras 3's own assign error in TF (deliberate)
        result: dict[str, Any] = {"status": status if isinstance(status, Exception) else type(status).__name__}
        if not isinstance(status, Exception):
            result["checks"] = self.checks(status, checks, leaves)
        for k, (action, name) in enumerate(late):
            result[f"late{k}_{action}_{name}"] = outcome(lambda action=action, name=name: self.late(
                ckpt, action, name, pending, leaves), self.dir)
        if late and not isinstance(status, Exception):
            result["checks_after"] = self.checks(status, checks, leaves)
        result["values"] = self.read(leaves)
        if counter:
            result["counter"] = outcome(lambda: ckpt.save_counter.numpy(), self.dir)
        return result

    def target(self, tree: Node, late: list[list[str]]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """A fresh Checkpoint of ``tree`` without the children attached late (returned apart), its leaves."""
        leaves: dict[str, Any] = {}
        attached_late = {name for action, name in late if action == "attach"}
        early = ["ckpt", {k: v for k, v in tree[1].items() if k not in attached_late}, tree[2]]
        ckpt = self.make(early, "", leaves)
        pending = {name: node for name, node in tree[1].items() if name in attached_late}
        return ckpt, leaves, pending

    def late(self, ckpt: Any, action: str, name: str, pending: dict[str, Any], leaves: dict[str, Any]) -> Any:
        """Attach a child after the restore, build a model or make its optimizer's slots."""
        if action == "attach":
            setattr(ckpt, name, self.make(pending[name], f"/{name}", leaves))
            return "attached"
        model = leaves.get(f"/{name}")
        if not isinstance(model, _Model):
            return "no model"
        if action == "build":
            model.build()
        elif model.optimizer is not None:
            model.slots()
        return action

    def checks(self, status: Any, names: list[str], leaves: dict[str, Any]) -> dict[str, Any]:
        """Each named status method: ``"ok"`` if it returns the status, else its error. A list of several unmatched
        objects is cut (TF lists them in the order of an identity set, by address), and so is one with models among
        ``leaves`` (Keras 3's variables have a repr of their own; mirrorlab's Keras weights are its variables)."""
        models = any(isinstance(leaf, _Model) for leaf in leaves.values())

        def check(name: str) -> Any:
            found = outcome(lambda: "ok" if getattr(status, name)() is status else "other", self.dir)
            if isinstance(found, Exception) and (models or _several(str(found))):
                return type(found)(UNMATCHED.sub(r"\1...]", str(found)))
            return found
        return {name: check(name) for name in names}

    def make_manager(self, args: dict[str, Any], ckpt: Any) -> Any:
        """A CheckpointManager of ``args`` over ``ckpt`` (its step counter fresh)."""
        step = None if args["step"] is None else self.api.Variable(0, dtype=args["step"])
        self.step_counter = step
        init = (lambda: self.calls.append("init")) if args["init"] else None
        return self.api.train.CheckpointManager(
            ckpt, str(self.dir / args["dir"]), max_to_keep=args["max_to_keep"],
            keep_checkpoint_every_n_hours=args["keep_hours"], checkpoint_name=args["name"], step_counter=step,
            checkpoint_interval=args["interval"], init_fn=init, last_checkpoint_step=args["last_step"])

    def manager_info(self, manager: Any) -> dict[str, Any]:
        """A manager's latest checkpoint, checkpoints, directory and interval."""
        return {"latest": self.shown(manager.latest_checkpoint),
                "checkpoints": [self.shown(p) for p in manager.checkpoints],
                "directory": self.shown(manager.directory), "interval": manager.checkpoint_interval}

    def new_manager(self, args: dict[str, Any]) -> Any:
        """Make the spec's manager over the saving checkpoint."""
        self.manager_args = args
        self.manager = None
        self.manager = self.make_manager(args, self.root)
        self.manager_step = self.step_counter
        return self.manager_info(self.manager)

    def manager_save(self, number: Any, check_interval: bool, step: int) -> Any:
        """Set the step counter, then save with the manager."""
        if self.manager is None:
            return "no manager"
        if self.manager_step is not None:
            self.manager_step.assign(step)
        if isinstance(number, list):
            number = self.api.Variable(number[1], dtype="int64")
        return self.track(self.manager.save(checkpoint_number=number, check_interval=check_interval))

    def restore_or_initialize(self, target: Any, late: list[list[str]]) -> dict[str, Any]:
        """A new manager of the last arguments over the saving objects or a fresh target: what
        restore_or_initialize returns, the init_fn calls, the late actions and the values."""
        if not self.manager_args:
            return {"manager": "none"}
        if target == "self":
            ckpt, leaves, pending = self.root, self.leaves, {}
        else:
            ckpt, leaves, pending = self.target(target, late)
        manager = outcome(lambda: self.make_manager(self.manager_args, ckpt), self.dir)
        if isinstance(manager, Exception):
            return {"manager": manager}
        before = len(self.calls)
        result: dict[str, Any] = {"returned": outcome(lambda: self.shown(manager.restore_or_initialize()), self.dir)}
        result["calls"] = self.calls[before:]
        for k, (action, name) in enumerate(late):
            result[f"late{k}_{action}_{name}"] = outcome(lambda action=action, name=name: self.late(
                ckpt, action, name, pending, leaves), self.dir)
        result["values"] = self.read(leaves)
        return result

    def checkpoint_state(self, sub: str, filename: str | None) -> Any:
        """get_checkpoint_state's fields (paths shown, timestamps counted)."""
        found = self.api.train.get_checkpoint_state(str(self.dir / sub), filename)
        return None if found is None else {
            "latest": self.shown(found.model_checkpoint_path),
            "all": [self.shown(p) for p in found.all_model_checkpoint_paths],
            "timestamps": len(found.all_model_checkpoint_timestamps),
            "preserved": float(found.last_preserved_timestamp) > 0}

    def keys(self, source: list[Any]) -> list[str]:
        """The saved keys (object graph left out) of a source, sorted."""
        return sorted(k for k, _ in self.api.train.list_variables(self.where(source)) if k != GRAPH_KEY)

    def load_variable(self, source: list[Any], how: str, index: int) -> Any:
        """load_variable of a saved key (by index), with ``:0``, without its suffix, a missing key, or the object
        graph (its type only: TF's is a serialized proto, mirrorlab's JSON)."""
        where = self.where(source)
        if how == "missing":
            return self.api.train.load_variable(where, "nope")
        if how == "graph":
            return type(self.api.train.load_variable(where, GRAPH_KEY)).__name__
        keys = self.keys(source)
        if not keys:
            return "no keys"
        key = keys[index % len(keys)]
        key = {"key": key, "colon": key + ":0", "bare": key.split("/.ATTRIBUTES")[0]}[how]
        return _array(self.api.train.load_variable(where, key))

    def reader(self, source: list[Any]) -> dict[str, Any]:
        """load_checkpoint's reader: its type, shape and dtype maps, has_tensor and get_tensor."""
        reader = self.api.train.load_checkpoint(self.where(source))
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        keys = sorted(k for k in shapes if k != GRAPH_KEY)
        return {"type": type(reader).__name__, "shapes": {k: [int(d) for d in v] for k, v in shapes.items()},
                "dtypes": {k: numpy_dtype(v) for k, v in dtypes.items() if k != GRAPH_KEY},
                "has": [reader.has_tensor(k) for k in (*keys, GRAPH_KEY, "nope", "v")],
                "tensors": {k: outcome(lambda k=k: _array(reader.get_tensor(k)), self.dir) for k in keys},
                "missing": outcome(lambda: reader.get_tensor("nope"), self.dir)}

    def delete(self, source: list[Any]) -> list[str]:
        """Delete a checkpoint's files; what was deleted (as prefixes)."""
        where = self.where(source)
        if not isinstance(where, str):
            return []
        prefix = Path(where)
        gone = set()
        for file in prefix.parent.iterdir() if prefix.parent.is_dir() else ():
            match = CHECKPOINT_FILE.match(file.name)
            if match and match.group(1) == prefix.name and file.is_file():
                file.unlink()
                gone.add(self.shown(where))
        return sorted(gone)

    def listing(self) -> dict[str, Any]:
        """The directory's checkpoint prefixes and the state files' lines."""
        def lines(sub: str) -> list[str] | None:
            """The state file's lines in ``sub`` (the case directory as ``<dir>``)."""
            found = state(self.dir / sub)
            return None if found is None else [self.shown(line) for line in found]
        states = {f"state{'/' + sub if sub else ''}": lines(sub) for sub in ("", "sub", "m")}
        return {"files": files(self.dir), **states}

    def step(self, step: list[Any]) -> Any:
        """One step's result."""
        kind, args = step[0], step[1:]
        api = self.api
        actions: dict[str, Callable[..., Any]] = {
            "save": lambda prefix: self.track(self.root.save(str(self.dir / prefix))),
            "write": lambda prefix: self.track(self.root.write(str(self.dir / prefix))),
            "assign": self.assign, "assign_replicas": self.assign_replicas, "attach": self.attach,
            "alias": self.alias, "state_file": self.state_file,
            "counter": lambda: self.root.save_counter.numpy(), "train": self.train, "restore": self.restore,
            "manager": self.new_manager, "manager_save": self.manager_save,
            "manager_info": lambda: self.manager_info(self.manager) if self.manager is not None else "no manager",
            "restore_or_initialize": self.restore_or_initialize,
            "latest": lambda sub, name: self.shown(api.train.latest_checkpoint(str(self.dir / sub), name)),
            "state": self.checkpoint_state,
            "list_variables": lambda source: [[k, [int(d) for d in shape]]
                                              for k, shape in api.train.list_variables(self.where(source))],
            "load_variable": self.load_variable, "reader": self.reader, "delete": self.delete,
            "files": self.listing}
        return actions[kind](*args)


def _several(message: str) -> bool:
    """Whether a status message may list several objects (assert_nontrivial_match's list does not say how many)."""
    count = COUNT.match(message)
    return int(count.group(1)) > 1 if count else "no matching checkpointed value: [" in message


def _array(found: Any) -> Any:
    """A value read from a checkpoint, a scalar string (bytes) as an array (the adapters normalize arrays)."""
    return np.asarray(found) if isinstance(found, bytes) else found


def outcome(fn: Callable[[], Any], directory: Path) -> Any:
    """``fn()``, or its exception as one comparable in both frameworks: its class name and first line, the case
    directory as ``<dir>`` and object reprs as checkpoint_cases.scrub writes them."""
    try:
        return fn()
    except Exception as error:
        lines = str(error).splitlines()
        text = scrub(lines[0] if lines else "", directory)
        return type(type(error).__name__, (Exception,), {})(text)


def build(spec: Spec) -> Callable[[Any, Any], dict[str, Any]]:
    """The case function of ``spec``: build the tree in the strategy, then run every step in a fresh directory."""
    def fn(api: Any, s: Any) -> dict[str, Any]:
        directory = Path(tempfile.mkdtemp(prefix=PREFIX))
        try:
            run = Run(api, s, directory)
            root = outcome(lambda: run.make(spec["tree"], "", run.leaves), directory)
            if isinstance(root, Exception):
                return {"tree": root}
            run.root = root
            result: dict[str, Any] = {"values": run.read(run.leaves)}
            for k, step in enumerate(spec["steps"]):
                result[f"{k:02d}_{step[0]}"] = outcome(lambda step=step: run.step(step), directory)
            return result
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return fn
