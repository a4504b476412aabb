"""Record TensorFlow 2.21's results of the tensor-function expressions (ops_cases.py) into ``golden/ops.json``.

Run with TensorFlow installed (a few seconds), after changing ops_cases.py::

    /work/tfvenv/bin/python tests/conformance/record_ops_golden.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorflow as tf  # noqa: E402

from conformance.harness import save_golden  # noqa: E402
from conformance.ops_cases import OPS_EXPRESSIONS, evaluate  # noqa: E402


def main() -> None:
    cases = {expression: [evaluate(tf, expression)] for expression in OPS_EXPRESSIONS}
    save_golden("ops", tf.__version__, cases)
    print(f"recorded {len(cases)} tensor-function expressions from TensorFlow {tf.__version__}")


if __name__ == "__main__":
    main()
