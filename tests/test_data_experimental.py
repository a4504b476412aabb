"""``mirrorlab.tf.data.experimental``: the functional forms match the dataset methods, ``assert_cardinality`` checks
counts as TF's kernel does and is dropped by FILE sharding, ``from_list`` types its elements, and a plain
iterator has TF's ``get_next``/``get_next_as_optional`` (TF's own values are in the pipeline goldens)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.tf.data.sharding import auto_shard

E = ml.data.experimental
Dataset = ml.data.Dataset


def values(dataset) -> list:
    return [np.asarray(x).tolist() for x in dataset]


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 8), expected=st.integers(0, 8))
def test_assert_cardinality_passes_exact_counts_and_fails_at_the_telling_element(size, expected):
    """The declared count is the cardinality; reading fails at element expected+1, or at the end when short."""
    dataset = Dataset.range(size).filter(lambda x: x >= 0).apply(E.assert_cardinality(expected))
    assert int(dataset.cardinality()) == expected
    seen = []
    if size == expected:
        assert values(dataset) == list(range(size))
        return
    with pytest.raises(ml.errors.FailedPreconditionError) as info:
        for x in dataset:
            seen.append(int(x))
    assert seen == list(range(min(size, expected)))
    word = "at least" if size > expected else "only"
    assert f"expected to contain {expected} element" in str(info.value) and word in str(info.value)


def test_assert_cardinality_messages_use_tf_wording():
    """Singular for one element, TF's words for an infinite count."""
    with pytest.raises(ml.errors.FailedPreconditionError, match="contain 1 element but contained only 0 elements"):
        values(Dataset.range(0).apply(E.assert_cardinality(1)))
    with pytest.raises(ml.errors.FailedPreconditionError,
                       match="an infinite number of elements but contained only 2 elements"):
        values(Dataset.range(2).apply(E.assert_cardinality(E.INFINITE_CARDINALITY)))


def test_file_sharding_drops_assert_cardinality(tmp_path):
    """Each worker reads only its files, so TF removes the assertion rather than fail every worker."""
    names = []
    for i in range(4):
        path = tmp_path / f"f{i}.txt"
        path.write_text("\n".join(f"{i}-{k}" for k in range(3)))
        names.append(str(path))
    dataset = ml.data.TextLineDataset(names).apply(E.assert_cardinality(12)).batch(2)
    worker1 = [[s.decode() for s in batch] for batch in auto_shard(dataset, 2, 1, 2)]
    assert worker1 == [["1-0", "1-1"], ["1-2", "3-0"], ["3-1", "3-2"]]


def test_functional_forms_equal_the_methods():
    base = Dataset.range(9)
    assert values(base.apply(E.shuffle_and_repeat(4, count=2, seed=3))) == values(base.shuffle(4, seed=3).repeat(2))
    assert values(base.apply(E.map_and_batch(lambda x: x + 1, 4, drop_remainder=True))) == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert values(base.batch(4).apply(E.unbatch())) == list(range(9))
    assert values(base.apply(E.enumerate_dataset(3)).take(1)) == [[3, 0]]
    assert values(E.Counter(2, 3).take(3)) == [2, 5, 8]
    assert int(E.cardinality(base)) == 9
    with pytest.raises(ValueError, match="only one of `num_parallel_batches` and `num_parallel_calls`"):
        E.map_and_batch(lambda x: x, 2, num_parallel_batches=1, num_parallel_calls=1)


def test_from_list_types_elements_and_leaves_differing_dims_unknown():
    dataset = E.from_list([([1], "a"), ([2, 3], "bc")])
    spec = dataset.element_spec
    assert spec[0].shape == (None,) and spec[0].dtype == np.int32 and int(dataset.cardinality()) == 2
    assert [x.tolist() for x, _ in dataset] == [[1], [2, 3]]
    assert E.from_list([1, [2]]).element_spec.shape is None
    with pytest.raises(ValueError, match="should not be empty"):
        E.from_list([])
    with pytest.raises(AttributeError, match="same structure and dtypes"):
        E.from_list([1, "a"])


def test_plain_iterator_get_next_and_optional():
    iterator = iter(Dataset.range(1))
    assert iterator.element_spec == ml.data.TensorSpec((), np.int64)
    assert int(E.get_next_as_optional(iterator).get_value()) == 0
    assert not bool(iterator.get_next_as_optional().has_value())
    with pytest.raises(ml.errors.OutOfRangeError, match="End of sequence"):
        iterator.get_next()
