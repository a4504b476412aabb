"""mirrorlab's float32 results do not depend on which SIMD kernels NumPy picks for this CPU: the transcendental
functions of ops, Keras activations and losses give the same bits with NumPy limited to its baseline kernels
(``NPY_DISABLE_CPU_FEATURES``) as with everything this CPU has. Skipped on a CPU with nothing beyond the baseline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .dispatch import enabled_dispatch_targets

# Each line: a float32 result, as the hex of its bytes; x spans the ranges where SIMD kernels differ in the last bit.
PROGRAM = r"""
import json
import numpy as np
import mirrorlab.tf as tf
from mirrorlab.tf._kernels import portable_math
rng = np.random.default_rng(7)
x = np.concatenate([rng.standard_normal(4000) * s for s in (0.05, 1.0, 6.0)]).astype(np.float32)
p = np.abs(x) + np.float32(1e-3)
labels = (rng.random(x.size) < 0.5).astype(np.float32)
results = {
    "tf.math.log1p": tf.math.log1p(p), "tf.math.expm1": tf.math.expm1(x), "tf.math.tanh": tf.math.tanh(x),
    "tf.math.exp": tf.math.exp(x), "tf.math.log": tf.math.log(p), "tf.math.pow": tf.math.pow(p, x),
    "tf.nn.sigmoid": tf.nn.sigmoid(x),
    "tf.nn.sigmoid_cross_entropy_with_logits": tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=x),
    "keras softmax": tf.keras.activations.softmax(x.reshape(-1, 6)),
    "keras tanh": tf.keras.activations.tanh(x), "keras sigmoid": tf.keras.activations.sigmoid(x),
    "keras binary crossentropy": tf.keras.losses.BinaryCrossentropy(reduction=None)(labels, tf.nn.sigmoid(x)),
    "keras logits crossentropy": tf.keras.losses.CategoricalCrossentropy(from_logits=True, reduction=None)(
        np.eye(6, dtype=np.float32)[labels.astype(int).reshape(-1, 6)[:, 0]], x.reshape(-1, 6)),
    **{f"portable_math.{n}": getattr(portable_math, n)(x) for n in ("exp", "expm1", "tanh", "cos")},
    **{f"portable_math.{n}": getattr(portable_math, n)(p) for n in ("log", "log1p")},
}
print(json.dumps({k: np.asarray(v).tobytes().hex() for k, v in results.items()}))
"""


def _results(disabled: str) -> dict[str, str]:
    """PROGRAM's results in a fresh interpreter with ``NPY_DISABLE_CPU_FEATURES=disabled``."""
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2], check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_float32_results_are_the_same_with_baseline_simd_kernels() -> None:
    targets = enabled_dispatch_targets()
    if not targets:
        pytest.skip("this CPU has no SIMD dispatch target beyond NumPy's baseline: one code path only")
    full, baseline = _results(""), _results(" ".join(targets))
    assert [name for name in full if full[name] != baseline[name]] == []
