"""The two layers keep one direction: the core (and the simulator, backend and diagnostics) never imports the
TensorFlow look-alike ``mirrorlab.tf``; ``mirrorlab.tf`` builds on the core."""

from __future__ import annotations

import ast
import types
import subprocess
import sys
from pathlib import Path

import mirrorlab

ROOT = Path(__file__).resolve().parents[1]
CORE_FOLDERS = {"mirrorlab": ROOT / "mirrorlab", "mirrorlab.sim": ROOT / "sim", "mirrorlab.backend": ROOT / "backend",
                "mirrorlab.diagnostics": ROOT / "diagnostics"}


def _core_modules() -> dict[str, Path]:
    """Every module of the core packages, by dotted name (``mirrorlab/tf`` left out)."""
    modules = {}
    for package, folder in CORE_FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "mirrorlab" and parts[0] == "tf":
                continue
            if parts[-1] == "__main__":
                continue
            inside = parts[:-1] if parts[-1] == "__init__" else parts
            name = ".".join((package, *inside))
            modules[name] = path
    return modules


def _imported(module: str, path: Path) -> set[str]:
    """The absolute names of everything ``path`` imports, at any depth (function-level imports included)."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def test_no_core_source_imports_the_tf_layer():
    offenders = {module: sorted(n for n in _imported(module, path) if n == "mirrorlab.tf" or
                                n.startswith("mirrorlab.tf."))
                 for module, path in _core_modules().items()}
    assert not {m: names for m, names in offenders.items() if names}


def test_the_layering_check_sees_an_offending_import(tmp_path):
    """The check above can fail: a core-style module importing the tf layer relatively is caught."""
    bad = tmp_path / "variables.py"
    bad.write_text("from ..tf.autodiff import GradientTape\n")
    assert "mirrorlab.tf.autodiff" in _imported("mirrorlab.distribute.variables", bad)


def test_importing_every_core_module_loads_no_tf_module():
    """In a fresh interpreter (nothing imported before): the core, the simulator and the CLI stand alone."""
    names = sorted(_core_modules())
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m == 'mirrorlab.tf' or m.startswith('mirrorlab.tf.'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_top_level_namespace_is_the_frameworks_own_surface():
    assert mirrorlab.__all__ == ["__version__", "errors", "SimCluster", "SimConfig", "RunResult", "Fault", "Crash",
                                 "Preempt", "Slow", "Delay", "Drop", "Cut"]
    # besides __all__, only submodules (attributes once imported) may appear ("@py_builtins"/"@pytest_ar": pytest
    # rewrites the asserts of the distribution that registers its plugin)
    extra = {name: value for name, value in vars(mirrorlab).items()
             if not name.startswith(("_", "@")) and name not in mirrorlab.__all__}
    assert all(isinstance(value, types.ModuleType) for value in extra.values()), extra


def test_tf_namespace_runs_tf_code_with_the_import_changed():
    import mirrorlab.tf as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        v = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        y = v * v
    assert float(tape.gradient(y, v)) == 4.0
    assert tf.data.Dataset.range(3).reduce(tf.constant(0, tf.int64), lambda a, b: a + b).numpy() == 3
