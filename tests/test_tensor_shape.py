"""``tf.TensorShape`` as TF 2.21 answers (values and errors recorded from it), and where shapes are taken."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab.tf as ml


def test_partial_shapes_answer_as_tf():
    s = ml.TensorShape([2, None, 3])
    assert (repr(s), str(s), s.rank, s.ndims, s.as_list(), s[0], s[1], len(s)) == (
        "TensorShape([2, None, 3])", "(2, None, 3)", 3, 3, [2, None, 3], 2, None, 3)
    assert s[1:] == ml.TensorShape([None, 3]) and s == (2, None, 3) and s == [2, None, 3]
    assert not s.is_fully_defined() and s.num_elements() is None and ml.TensorShape([2, 3]).num_elements() == 6
    assert s.is_compatible_with([2, 5, 3]) and s.merge_with([2, 5, 3]) == (2, 5, 3)
    with pytest.raises(ValueError, match=r"^Shapes \(2, None, 3\) and \(1, 5, 3\) are not compatible$"):
        s.merge_with([1, 5, 3])
    with pytest.raises(ValueError, match=r"^Shape \(2, None, 3\) must have rank 2$"):
        s.with_rank(2)
    assert s.concatenate([4]) == (2, None, 3, 4) and ml.TensorShape([2, 3]) + [4] == (2, 3, 4)
    assert ml.TensorShape([1, 2]).most_specific_compatible_shape([1, 3]) == (1, None)
    assert str(ml.TensorShape([])) == "()" and str(ml.TensorShape(3)) == "(3,)" and bool(ml.TensorShape([]))


def test_unknown_rank_and_bad_dimensions_raise_tfs_errors():
    u = ml.TensorShape(None)
    assert (repr(u), str(u), u.rank, bool(u)) == ("TensorShape(None)", "<unknown>", None, False)
    with pytest.raises(ValueError, match=r"^as_list\(\) is not defined on an unknown TensorShape.$"):
        u.as_list()
    with pytest.raises(ValueError, match="^Cannot take the length of shape with unknown rank.$"):
        len(u)
    with pytest.raises(TypeError, match="^Dimension value must be integer or None or have an __index__ method, got "
                                        "value '2.5' with type '<class 'float'>'$"):
        ml.TensorShape([2.5])
    with pytest.raises(ValueError, match="^Dimension -1 must be >= 0$"):
        ml.TensorShape([-1])


def test_specs_generators_and_keras_inputs_take_tensor_shapes():
    assert repr(ml.TensorSpec(ml.TensorShape([None, 2]), ml.float32)) == (
        "TensorSpec(shape=(None, 2), dtype=tf.float32, name=None)")
    ds = ml.data.Dataset.from_generator(lambda: iter([np.ones(4)]), output_types=ml.float32,
                                        output_shapes=ml.TensorShape([4]))
    assert ds.element_spec == ml.TensorSpec([4], ml.float32)
    assert ml.keras.Input(shape=ml.TensorShape([3])).shape == (None, 3)
