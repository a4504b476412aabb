"""Record Keras 3 on TensorFlow 2.21's results of the Keras cases (keras_cases.py) into ``golden/keras.json``.

Run with TensorFlow (and the ``tensorboard`` package, which ``tf.summary`` needs for the case tensorboard_scalars)
installed (about half a minute), after changing keras_cases.py::

    /work/tfvenv/bin/python tests/conformance/record_keras_golden.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from conformance.harness import save_golden  # noqa: E402
from conformance.keras_cases import KERAS_CASES, KerasEnv, run_case  # noqa: E402


def main() -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    env = KerasEnv(keras, tf.data, tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
                   tf.distribute.get_replica_context, tf.train, tf)
    cases = {name: [run_case(name, env)] for name in KERAS_CASES}
    save_golden("keras", tf.__version__, cases)
    print(f"recorded {len(cases)} Keras cases from TensorFlow {tf.__version__}")


if __name__ == "__main__":
    main()
