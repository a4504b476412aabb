"""``mirrorlab.tensor``: TF's dtype names, from arrays, dtypes and dtype-likes, the same on every (cached) call."""

from __future__ import annotations

import numpy as np
import pytest

from mirrorlab.tensor import IndexedSlices, dtype_name

CASES = [
    (np.zeros(2, np.float32), "float32"), (np.dtype(">f4"), "float32"), ("float64", "float64"), (float, "float64"),
    (bool, "bool"), (np.int64(3), "int64"), (np.dtype("complex64"), "complex64"), (np.zeros(1, "U3"), "string"),
    (np.array(b"x"), "string"), (np.zeros(1, object), "string"), ("S3", "string"),
    (np.dtype("M8[ns]"), "datetime64[ns]"), (IndexedSlices(np.ones(2, np.float16), np.arange(2)), "float16"),
]


@pytest.mark.parametrize("value, name", CASES)
def test_dtype_name_spells_dtypes_as_tf_on_every_call(value, name):
    assert [dtype_name(value), dtype_name(value)] == [name, name]


def test_dtype_name_refuses_what_is_not_a_dtype():
    with pytest.raises(TypeError):
        dtype_name("no such dtype")
