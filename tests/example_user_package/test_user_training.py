"""How a user property-tests training code with mirrorlab's public toolkit: the ``sim_cluster`` fixture, the
``cluster_shapes`` marker, named combinations and Hypothesis strategies (no mirrorlab internals)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlab.testing import cluster_shapes, global_batches, seeds
from mirrorlab.testing.combinations import mirrored_1x4_cpu, multi_worker_mirrored_2x1_cpu, one_device_1x1_cpu
from user_training import train


@pytest.mark.cluster_shapes("multi_worker_mirrored_2x1_cpu", "multi_worker_mirrored_2x2_cpu", mirrored_1x4_cpu)
def test_every_worker_ends_with_the_same_weights(sim_cluster, cluster_shape):
    weights = sim_cluster.run(train, 6).values()
    assert len(weights) == cluster_shape.workers
    assert all(w == weights[0] for w in weights)


@settings(max_examples=10, deadline=None)
@given(shape=cluster_shapes(max_workers=3), seed=seeds(), data=st.data())
def test_training_matches_a_single_device_run(sim_cluster, shape, seed, data):
    batch = data.draw(global_batches(shape.replicas))
    alone = sim_cluster.run(train, batch, shape=one_device_1x1_cpu).values()[0]
    for weights in sim_cluster.run(train, batch, seed=seed, shape=shape).values():
        np.testing.assert_allclose(weights, alone, rtol=1e-5, atol=1e-6)


def test_named_shape_is_a_chief_and_a_worker(sim_cluster):
    assert sim_cluster.shape == multi_worker_mirrored_2x1_cpu
    assert multi_worker_mirrored_2x1_cpu.cluster().config.chief
