"""``stack_parts``: the replicas' parts of a value stacked, as a view when they lie one after the other in memory."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlab.distribute.stacked_run import stack_parts


@settings(max_examples=60, deadline=None)
@given(replicas=st.integers(1, 6), rows=st.integers(0, 4), width=st.integers(1, 5),
       dtype=st.sampled_from([np.float32, np.float64, np.int64, np.uint8]), order=st.sampled_from(
           ["split", "reversed", "copied", "strided", "two owners"]))
def test_stack_parts_equals_np_stack_and_views_only_adjacent_parts(replicas, rows, width, dtype, order):
    whole = np.arange(replicas * 2 * rows * width).astype(dtype).reshape(replicas * 2, rows, width)
    if order == "split":
        parts = [whole[k] for k in range(replicas)]
    elif order == "reversed":
        parts = [whole[k] for k in reversed(range(replicas))]
    elif order == "copied":
        parts = [whole[k].copy() for k in range(replicas)]
    elif order == "strided":  # every other slab: not one after the other
        parts = [whole[2 * k] for k in range(replicas)]
    else:  # the same bytes in another array do not join the first array's memory
        other = whole.copy()
        parts = [whole[k] if k % 2 == 0 else other[k] for k in range(replicas)]
    stacked = stack_parts(parts)
    np.testing.assert_array_equal(stacked, np.stack(parts))
    assert stacked.dtype == np.dtype(dtype) and stacked.shape == (replicas, rows, width)
    viewed = rows > 0 and (order == "split" or replicas == 1 and order != "copied")  # (one part: itself)
    assert np.shares_memory(stacked, whole) == viewed


def test_a_view_is_writeable_as_the_parts_are_and_writes_where_each_replica_would():
    batch = np.zeros((4, 3), np.float32)
    stacked = stack_parts([batch[0:2], batch[2:4]])
    assert stacked.shape == (2, 2, 3) and stacked.flags.writeable
    stacked[1, 0] = 7  # replica 1's first row is row 2 of the batch
    assert batch[2].tolist() == [7, 7, 7] and batch.sum() == 21
    batch.flags.writeable = False
    read_only = stack_parts([batch[0:2], batch[2:4]])
    assert np.shares_memory(read_only, batch) and not read_only.flags.writeable
    with pytest.raises(ValueError):
        read_only[0, 0, 0] = 1


def test_parts_of_mixed_shapes_or_dtypes_are_not_viewed():
    batch = np.arange(12, dtype=np.float32)
    with pytest.raises(ValueError):  # (np.stack's error: the parts differ in shape)
        stack_parts([batch[0:4], batch[4:7]])
    mixed = stack_parts([batch[0:4], batch[4:8].view(np.int32)])
    assert not np.shares_memory(mixed, batch) and mixed.dtype == np.float64
