"""``tf.print``'s layout, byte for byte as TF 2.21 printed the same inputs (recorded from it)."""

from __future__ import annotations

import io

import numpy as np

import mirrorlab.tf as ml


def printed(*inputs, **kwargs) -> str:
    stream = io.StringIO()
    ml.print(*inputs, output_stream=stream, **kwargs)
    return stream.getvalue()


def test_tensors_and_python_values_print_as_tf():
    assert printed(ml.constant([1, 2])) == "[1 2]\n"
    assert printed(ml.constant([1.0, 2.5, 3.0])) == "[1 2.5 3]\n"
    assert printed(ml.constant(3.5), "loss:", 2, 2.5, True, None) == "3.5 loss: 2 2.5 True None\n"
    assert printed(ml.constant([[1.0, 2.0], [3.0, 4.0]])) == "[[1 2]\n [3 4]]\n"
    assert printed((ml.constant([0, 1]), ml.constant([2, 3]))) == "([0 1], [2 3])\n"
    assert printed({"a": ml.constant(1), "b": [ml.constant(2.0), "x"]}) == "{'a': 1, 'b': [2, 'x']}\n"
    assert printed(ml.constant(["a", "bc"]), ml.constant([True, False])) == '["a" "bc"] [1 0]\n'
    assert printed(ml.constant([1, 2]), sep=",", end="!\n") == "[1 2]!\n"


def test_floats_use_the_shortest_exact_digits_of_their_width():
    assert printed(ml.constant([1e-5, 123456.0, 0.1])) == "[1e-05 123456 0.1]\n"
    assert printed(ml.constant([1.0 / 3]), ml.constant(np.float64(1.0 / 3))) == "[0.333333343] 0.33333333333333331\n"
    assert printed(ml.constant(-0.0), ml.constant(np.nan), ml.constant(np.inf), ml.constant(1e20)) == (
        "-0 nan inf 1e+20\n")


def test_summarize_keeps_that_many_values_at_each_end():
    assert printed(ml.constant(np.arange(10))) == "[0 1 2 ... 7 8 9]\n"
    assert printed(ml.constant(np.arange(10)), summarize=-1) == "[0 1 2 3 4 5 6 7 8 9]\n"
    assert printed(ml.constant(np.arange(7)), summarize=2) == "[0 1 ... 5 6]\n"
    assert printed(ml.constant(np.arange(100).reshape(10, 10))) == (
        "[[0 1 2 ... 7 8 9]\n [10 11 12 ... 17 18 19]\n [20 21 22 ... 27 28 29]\n ...\n"
        " [70 71 72 ... 77 78 79]\n [80 81 82 ... 87 88 89]\n [90 91 92 ... 97 98 99]]\n")
    assert printed(ml.constant([]), ml.constant(np.zeros((2, 0)))) == "[] [\n ...]\n"


def test_variables_print_their_value_and_output_goes_to_stderr_by_default(capsys, tmp_path):
    strategy = ml.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():
        w = ml.Variable([1.0, 2.0])
    assert printed(w, ml.Variable(3)) == "[1 2] 3\n"
    ml.print("to stderr", ml.constant(1))
    assert capsys.readouterr() == ("", "to stderr 1\n")
    ml.print("line", output_stream=f"file://{tmp_path / 'log.txt'}")
    assert (tmp_path / "log.txt").read_text() == "line\n"
    lines = []
    ml.print("logged", ml.constant([1]), output_stream=lines.append)
    assert lines == ["logged [1]"]
