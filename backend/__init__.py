"""The real multi-process backend: one process per worker, gRPC between them (see docs/backend.md).

A process whose TF_CONFIG names a multi-worker cluster gets ``environment.BackendEnvironment`` as its
default environment; ``mirrorlab launch`` (``launch.py``) starts such processes on one machine.
"""
