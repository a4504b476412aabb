"""The deterministic in-process cluster simulator.

``SimCluster(workers=N, devices_per_worker=M, seed=S, faults=[...]).run(program)`` runs ``program``
once per simulated worker in this process, on virtual time, with one seed fixing the interleaving.
"""

from .cluster import RunResult, SimCluster, SimConfig
from .faults import Crash, Cut, Delay, Drop, Fault, Preempt, Slow
from .worker_setup import WorkerSetup

__all__ = ["SimCluster", "SimConfig", "RunResult", "Fault", "Crash", "Preempt", "Slow", "Delay", "Drop", "Cut", "WorkerSetup"]
