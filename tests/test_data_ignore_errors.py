"""``Dataset.ignore_errors``: failed elements are dropped and the ops upstream go on as TF's do (TF's own results for
every op are in the pipeline goldens, ``fixed_ignore_*``); here the rules as properties, what TF cannot show (its
reader retries a missing file forever), and what is not ignored (Python errors, which TF raises when tracing)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.sim import SimCluster

Dataset = ml.data.Dataset


def values(dataset) -> list:
    return [np.asarray(x).tolist() for x in dataset]


def failing_at(size: int, bad: set[int]) -> Dataset:
    """``range(size)`` whose elements in ``bad`` fail (integer division by zero), the others kept as they are."""
    flags = np.array([0 if i in bad else 1 for i in range(size)], np.int64)
    return Dataset.from_tensor_slices((np.arange(size, dtype=np.int64), flags)).map(lambda x, ok: x * ok // ok)


sizes_and_failures = st.integers(0, 14).flatmap(
    lambda n: st.tuples(st.just(n), st.sets(st.integers(0, max(n - 1, 0)), max_size=n)))


@settings(max_examples=60, deadline=None)
@given(case=sizes_and_failures, batch=st.integers(1, 5))
def test_ignored_failures_leave_the_other_elements_in_order(case, batch):
    """map -> ignore_errors keeps exactly the elements that did not fail; batching after it batches those."""
    size, bad = case
    good = [i for i in range(size) if i not in bad]
    assert values(failing_at(size, bad).ignore_errors()) == good
    assert values(failing_at(size, bad).ignore_errors().batch(batch)) == [
        good[k:k + batch] for k in range(0, len(good), batch)]


@settings(max_examples=60, deadline=None)
@given(case=sizes_and_failures, count=st.integers(0, 10))
def test_take_counts_only_elements_that_did_not_fail(case, count):
    """TF's take counts what it passes, so failures do not use up its count."""
    size, bad = case
    good = [i for i in range(size) if i not in bad]
    assert values(failing_at(size, bad).take(count).ignore_errors()) == good[:count]


@settings(max_examples=60, deadline=None)
@given(case=sizes_and_failures, batch=st.integers(1, 5))
def test_unfused_batch_drops_what_it_had_read_and_the_fused_kernel_the_whole_batch(case, batch):
    """A batch after a prefetch (not fused with the map) loses the elements it had read when one fails and starts
    the next batch after it; TF's fused map-and-batch kernel reads the whole batch and fails all of it."""
    size, bad = case
    expected, pending = [], []
    for i in range(size):
        if i in bad:
            pending = []
            continue
        pending.append(i)
        if len(pending) == batch:
            expected.append(pending)
            pending = []
    expected += [pending] if pending else []
    assert values(failing_at(size, bad).prefetch(1).batch(batch).ignore_errors()) == expected
    windows = [list(range(k, min(k + batch, size))) for k in range(0, size, batch)]
    assert values(failing_at(size, bad).batch(batch).ignore_errors()) == [w for w in windows if not bad & set(w)]


def test_only_tf_runtime_errors_are_ignored():
    """A Python error in a dataset function is a bug TF raises when it traces the function: never ignored."""
    def broken(x):
        raise KeyError("not a runtime error")

    with pytest.raises(KeyError):
        list(Dataset.range(3).map(broken).ignore_errors())


def test_a_generators_own_error_is_a_runtime_error_and_ends_it():
    """TF runs the generator at iteration time, so its error is an InvalidArgumentError naming the Python error (the
    original chained as the cause); ignored, it ends the dataset, as a Python generator that raised is finished."""
    def generate():
        yield 1
        raise KeyError("lost")

    with pytest.raises(ml.errors.InvalidArgumentError, match="KeyError: 'lost'") as raised:
        list(Dataset.from_generator(generate, output_types=np.int64, output_shapes=()))
    assert isinstance(raised.value.__cause__, KeyError)
    assert values(Dataset.from_generator(generate, output_types=np.int64, output_shapes=()).ignore_errors()) == [1]


def test_an_unknown_rank_signature_converts_as_convert_to_tensor():
    """One TensorSpec of unknown rank: TF converts each element with ``convert_to_tensor`` (Python floats refused
    for integers, NumPy values cast, Python ints wrapped), not with NumPy's casts; results seen in TF 2.21."""
    def generated(dtype):
        return Dataset.from_generator(lambda: iter([2.5, True, "5", np.float32(3.7), [1, 2], 300]),
                                      output_signature=ml.TensorSpec(None, dtype))

    assert values(generated(ml.int64).ignore_errors()) == [1, 3, [1, 2], 300]
    assert values(generated(ml.uint8).ignore_errors()) == [3, [1, 2], 44]
    with pytest.raises(ml.errors.InvalidArgumentError, match="did not match the expected structure"):
        list(generated(ml.int64))


def test_log_warning_logs_each_ignored_error(caplog):
    with caplog.at_level(logging.WARNING, logger="mirrorlab"):
        assert values(failing_at(5, {1, 3}).ignore_errors(log_warning=True)) == [0, 2, 4]
    logged = [r.getMessage() for r in caplog.records if "Error raised with error message" in r.getMessage()]
    assert len(logged) == 2 and all("Integer division by zero" in m for m in logged)


def test_a_missing_file_is_one_failure_and_reading_goes_on(tmp_path):
    """TF's reader retries a missing file forever under ignore_errors; mirrorlab skips it and reads the next."""
    first, last = tmp_path / "a.txt", tmp_path / "c.txt"
    first.write_text("1\n2\n")
    last.write_text("3\n")
    names = [str(first), str(tmp_path / "missing.txt"), str(last)]
    assert values(ml.data.TextLineDataset(names).ignore_errors()) == [b"1", b"2", b"3"]
    with pytest.raises(ml.errors.NotFoundError, match="missing.txt"):
        list(ml.data.TextLineDataset(names))


def test_an_error_after_ignore_errors_is_raised():
    with pytest.raises(ml.errors.InvalidArgumentError, match="Integer division by zero"):
        list(failing_at(4, {1}).ignore_errors().map(lambda x: x // (x - 2)))


def test_distributed_pipeline_with_ignored_failures_keeps_the_workers_in_step():
    """On 2 simulated workers the dropped elements never desync the collectives: every step has both workers, and
    together they see every element that did not fail."""
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        dataset = failing_at(11, {2, 7}).ignore_errors().batch(4)
        return [strategy.experimental_local_results(batch)[0].tolist()
                for batch in strategy.experimental_distribute_dataset(dataset)]

    results = SimCluster(workers=2, devices_per_worker=1, seed=3).run(program).values()
    assert len(results[0]) == len(results[1])
    seen = sorted(x for worker in results for batch in worker for x in batch)
    assert seen == [i for i in range(11) if i not in (2, 7)]
