"""``summation.tf_sum``: TF's order of float additions (its exact values against TF are in the ops goldens);
here, for every layout of axes, the shapes and values it gives (exact on integer-valued floats, where every order
agrees) and its rounding order on values chosen so that only one order gives the right answer."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlab.tf._kernels.summation import tf_sum, tf_sum_each


@st.composite
def arrays_and_axes(draw: st.DrawFn) -> tuple[np.ndarray, object, bool]:
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 8, 9, 17, 40]), min_size=1, max_size=4)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(-50, 50, size=shape).astype(draw(st.sampled_from([np.float32, np.float64])))
    axes = draw(st.one_of(st.none(), st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape))))
    axis = None if axes is None else tuple(axes)
    return values, axis, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(arrays_and_axes())
def test_shapes_and_exact_values_match_numpy_for_every_layout(case: tuple[np.ndarray, object, bool]) -> None:
    values, axis, keepdims = case
    expected = values.sum(axis=axis, keepdims=keepdims)
    result = tf_sum(values, axis=axis, keepdims=keepdims)
    assert np.shape(result) == expected.shape
    assert np.asarray(result).dtype == values.dtype
    np.testing.assert_array_equal(result, expected)


def test_packets_and_lone_values_add_in_eigens_order() -> None:
    # 9 values: the packet of 8 adds pairwise (1e8 cancels 1e8 within the packet), the 9th alone.
    values = np.array([1e8, 1, 1, 1, -1e8, 0, 0, 0, 1], np.float32)
    # Eigen: lone 1 + ((1e8 + -1e8) + (1 + 0) + ...) = 1 + 3 = 4; sequential would lose the ones to rounding.
    assert tf_sum(values) == np.float32(4)
    assert float(np.float32(sum(np.float32(v) for v in values))) != 4.0


def test_other_arrays_sum_as_numpy() -> None:
    ints = np.arange(10, dtype=np.int32)
    assert tf_sum(ints) == 45 and tf_sum(ints).dtype == np.int32
    assert tf_sum(np.zeros((0, 3), np.float32), axis=0).shape == (3,)
    assert tf_sum(np.float32(2.5) * np.ones((), np.float32)) == np.float32(2.5)


def _column_sum_one_by_one(column: np.ndarray, vectorised: bool) -> np.float32:
    """One output's sum of its rows, value by value: in a vectorised packet with 16 rows or more, every fourth row
    into one of four accumulators, combined in order, then the rows left over; otherwise the rows in order."""
    if not vectorised or len(column) < 16:
        total = column.dtype.type(0)
        for value in column:
            total = total + value
        return total
    four = len(column) // 4 * 4
    lanes = [column.dtype.type(0)] * 4
    for i in range(four):
        lanes[i % 4] = lanes[i % 4] + column[i]
    total = ((lanes[0] + lanes[1]) + lanes[2]) + lanes[3]
    for value in column[four:]:
        total = total + value
    return total


@settings(max_examples=80, deadline=None)
@given(outer=st.integers(1, 3), rows=st.integers(1, 40), columns=st.integers(1, 20), seed=st.integers(0, 2**32 - 1))
def test_sums_over_rows_add_each_output_as_its_packet_does(outer: int, rows: int, columns: int, seed: int) -> None:
    """Sums over the rows of slabs (``tf_sum_each``: each slab apart, its packets from its first column), against
    the same order written value by value, on values of wide-ranging magnitudes (where orders round differently)."""
    rng = np.random.default_rng(seed)
    slabs = (rng.standard_normal((outer, rows, columns)) * 10.0 ** rng.integers(-4, 5, (outer, rows, columns))
             ).astype(np.float32)
    if rows < 2 or columns < 2:  # (summed by tf_sum, which drops axes of size 1)
        return
    expected = np.array([[_column_sum_one_by_one(slabs[k, :, j], j < columns // 8 * 8) for j in range(columns)]
                         for k in range(outer)], np.float32)
    assert tf_sum_each(slabs).tobytes() == expected.tobytes()
