"""The deterministic in-process cluster simulator.

``SimCluster(workers=N, devices_per_worker=M, seed=S, faults=[...]).run(program)`` runs ``program``
once per simulated worker in this process, on virtual time, with one seed fixing the interleaving.

``RunResult.values()`` raises, and ``report()`` leads with, the root cause: the first error that was not passed
on from another worker's failure. Errors keep only the user's own frames in their tracebacks; set the
environment variable ``MIRRORLAB_TRACEBACK=1`` to keep mirrorlab's frames too. When a fault dropped messages,
errors name the pairs and counts and blame the network instead of the program.

A worker that blocks in real time outside mirrorlab (``threading.Event().wait()``, ``time.sleep``) would hold the
simulation forever; after ``SimCluster(watchdog=5.0)`` wall-clock seconds without any thread moving it ends with a
``HangError`` naming it and its stack, and the others go on. Library code that waits or polls uses
``mirrorlab.runtime.clock``, which is virtual time on a simulated worker.

A ``strategy.run`` that leaves a mirrored variable's copies different (aggregation NONE, updated per replica; TF
says nothing) raises ``MirroredCopiesDifferError``, on a worker or across workers; ``SimCluster(check_mirrors=False)``
keeps TF's silence.
"""

from .cluster import RunResult, SimCluster, SimConfig
from .faults import Clog, Crash, Cut, Delay, Drop, Fault, Isolate, Preempt, Slow
from .randomized_faults import Maybe
from .worker_setup import WorkerSetup

__all__ = ["SimCluster", "SimConfig", "RunResult", "Fault", "Crash", "Preempt", "Slow", "Delay", "Drop", "Cut", "Clog",
           "Isolate", "Maybe", "WorkerSetup"]
