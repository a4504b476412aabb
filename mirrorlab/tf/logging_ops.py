"""``tf.print``: TF 2.21's layout, byte for byte. Python structures are laid out by ``pprint``, each tensor in
them is summarized (``summarize`` values at each end of every dimension), floats get the shortest of 6/9 (float32)
or 15/17 (float64) significant digits that reads back exactly, booleans print as 1/0 and strings in quotes."""

from __future__ import annotations

import pprint
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import nest
from ..tensor import to_host
from .tensor_conversion import is_tensor

__all__ = ["print_v2", "summarize_value"]

_PLACEHOLDER = "{mirrorlab_tensor}"


def print_v2(*inputs: Any, output_stream: Any = None, summarize: int = 3, sep: str = " ", end: str = "\n",
             name: str | None = None) -> None:
    """Print ``inputs`` as ``tf.print`` does, to ``output_stream`` (sys.stderr by default, any object with
    ``write``, a logging function, or a ``"file://path"`` to append to)."""
    del name  # TF's op name: nothing to name in eager mode
    write = _writer(sys.stderr if output_stream is None else output_stream)
    tensors: list[Any] = []
    templates = []
    for item in inputs:
        if isinstance(item, str):
            templates.append(item)
            continue
        leaves = nest.flatten(item)  # (a tensor is its own single leaf)
        tensors += [leaf for leaf in leaves if _is_tensor(leaf)]
        flat = [_PLACEHOLDER if _is_tensor(leaf) else leaf for leaf in leaves]
        templates.append(pprint.pformat(nest.pack_sequence_as(item, flat)))
    template = sep.join(templates).replace(repr(_PLACEHOLDER), _PLACEHOLDER)
    pieces = template.split(_PLACEHOLDER)
    text = pieces[0] + "".join(summarize_value(t, summarize) + rest for t, rest in zip(tensors, pieces[1:]))
    write(text + end)


def _is_tensor(x: Any) -> bool:
    return is_tensor(x) or isinstance(x, np.generic)


def _writer(stream: Any) -> Callable[[str], None]:
    if isinstance(stream, str):
        if not stream.startswith("file://"):
            raise ValueError(f"Unsupported output stream {stream!r}.\nFix: pass sys.stdout, sys.stderr, a logging "
                             "function, or 'file://<path>'.")
        path = stream[len("file://"):]

        def append(text: str) -> None:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(text)
        return append
    if hasattr(stream, "write"):
        def write(text: str) -> None:
            stream.write(text)
            if hasattr(stream, "flush"):
                stream.flush()
        return write
    if callable(stream):  # logging.info and friends take the line without its end
        return lambda text: stream(text[:-1] if text.endswith("\n") else text)
    raise ValueError(f"Unsupported output stream {stream!r}.\nFix: pass sys.stdout, sys.stderr, a logging function, "
                     "or 'file://<path>'.")


def summarize_value(tensor: Any, max_entries: int = 3) -> str:
    """One tensor as ``tf.print`` shows it (TF's ``SummarizeValue`` in its print-v2 layout)."""
    value = np.asarray(to_host(tensor.read_value() if hasattr(tensor, "read_value") else tensor))
    count = value.size
    limit = min(count if max_entries is None or max_entries < 0 else max_entries, count)
    if value.dtype.kind == "c":  # TF prints no complex values
        body = " ".join("?" for _ in range(limit)) + ("..." if limit < count else "")
        return f"[{body}]" if value.ndim else body
    flat = value.reshape(-1)
    if value.ndim == 0:
        return _element(flat[0]) if count else ""
    out: list[str] = []
    _dim(0, value.shape, limit, flat, 0, out)
    return "".join(out)


def _dim(dim: int, shape: tuple, ends: int, flat: np.ndarray, start: int, out: list[str]) -> None:
    """TF's ``PrintOneDimV2``: ``ends`` entries from each end of dimension ``dim`` and "..." between."""
    if dim == len(shape):
        out.append(_element(flat[start]))
        return
    out.append("[")
    count, step = shape[dim], int(np.prod(shape[dim + 1:], dtype=np.int64))
    for i in range(min(ends, count)):
        if i:
            out.append(_spacing(dim, len(shape)))
        _dim(dim + 1, shape, ends, flat, start + step * i, out)
    if count > 2 * ends:
        out.append(_spacing(dim, len(shape)) + "...")
    for i in range(max(ends, count - ends), count):
        out.append(_spacing(dim, len(shape)))
        _dim(dim + 1, shape, ends, flat, start + step * i, out)
    out.append("]")


def _spacing(dim: int, ndim: int) -> str:
    return " " if dim == ndim - 1 else "\n" * (ndim - dim - 1) + " " * (dim + 1)


def _element(x: Any) -> str:
    if isinstance(x, (np.floating, float)):
        return _float(x)
    if isinstance(x, (np.bool_, bool)):
        return "1" if x else "0"
    if isinstance(x, (bytes, str, np.bytes_, np.str_)):
        raw = x.encode() if isinstance(x, str) else bytes(x)
        return '"' + _c_escape(raw) + '"'
    return str(int(x))


def _float(x: Any) -> str:
    """TF's FloatToBuffer/DoubleToBuffer: %g with FLT_DIG (DBL_DIG) digits, or 3 (2) more when that does not read
    back; float16 prints as float32."""
    single = not isinstance(x, float)  # Python floats and np.float64 (a float) are doubles
    value = np.float32(x) if single else np.float64(x)
    if np.isnan(value):
        return "-nan" if np.signbit(value) else "nan"
    short, long_ = (6, 9) if single else (15, 17)
    text = f"{float(value):.{short}g}"
    if (np.float32(text) if single else np.float64(text)) != value:
        text = f"{float(value):.{long_}g}"
    return text


def _c_escape(raw: bytes) -> str:
    """Abseil's CEscape: C escapes for quotes, backslash and control bytes, octal for other unprintables."""
    named = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}
    return "".join(named.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}") for b in raw)
