"""mirrorlab: synchronous multi-worker data-parallel training in the style of TensorFlow's
``MultiWorkerMirroredStrategy``, simulation first.

This namespace is the framework's own surface: the deterministic cluster simulator and its faults. The
TensorFlow-compatible API is ``import mirrorlab.tf as tf``::

    import mirrorlab.tf as tf
    from mirrorlab import SimCluster

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()   # reads the simulated TF_CONFIG
        ...

    SimCluster(workers=2, devices_per_worker=2, seed=0).run(program)
"""

from ._version import __version__
from . import errors
from .sim import Crash, Cut, Delay, Drop, Fault, Preempt, RunResult, SimCluster, SimConfig, Slow

__all__ = ["__version__", "errors", "SimCluster", "SimConfig", "RunResult", "Fault", "Crash", "Preempt", "Slow",
           "Delay", "Drop", "Cut"]
