"""Where a strategy runs: the environment (local process, simulated worker, real backend) that turns a
cluster description into a ``WorkerRuntime`` (devices, communicator, clock, trace, fault hooks)."""

from . import clock
from .base import Environment, WorkerRuntime
from .binding import bind_environment, current_environment
from .local import LocalEnvironment

__all__ = ["clock", "Environment", "WorkerRuntime", "LocalEnvironment", "current_environment", "bind_environment"]
