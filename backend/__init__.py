"""The real multi-process backend (one process per worker, gRPC between them).

Not part of this release yet: a program whose TF_CONFIG names several workers runs on
``mirrorlab.sim.SimCluster`` for now.
"""
