"""Checks on the files mirrorlab reads back (checkpoints, saved datasets, snapshots, ``.keras`` models): JSON of
bounded size checked against a schema, npz archives read without pickle, and arrays checked against the dtype and
shape declared for them. Every failure is a DataLossError naming the file and what is wrong (NotFoundError for a
missing file), never a KeyError, AttributeError, BadZipFile or EOFError from deep inside a reader."""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import errors
from ..tensor import dtype_name

__all__ = ["MAX_JSON_BYTES", "Schema", "check", "check_array", "dtype_named", "fields", "list_of", "map_of",
           "natural", "nullable", "one_of", "parse_json", "read_json", "read_npz", "kind", "SHAPE", "DTYPE"]

MAX_JSON_BYTES = 64 << 20  # no manifest or spec of mirrorlab's is near this

Schema = Callable[[Any, str], "str | None"]
"""A check of one JSON value at a path (``$.variables.v``): None if it conforms, else what was expected."""


def kind(*types: type) -> Schema:
    """A value of one of ``types`` (bool is no int here, as in JSON)."""
    def schema(value: Any, path: str) -> str | None:
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        return None if ok else f"{path} must be {' or '.join(t.__name__ for t in types)}"
    return schema


def natural(value: Any, path: str) -> str | None:
    """A non-negative int64."""
    return None if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 else \
        f"{path} must be a non-negative int64"


def dtype_named(value: Any) -> np.dtype | None:
    """The dtype mirrorlab's files name ``value`` (``float32``, ``string``, ...), None if no dtype is so named."""
    if value == "string":
        return np.dtype(object)
    try:
        dtype = np.dtype(value) if isinstance(value, str) else None
    except TypeError:
        return None
    return dtype if dtype is not None and dtype.kind in "biufc" and dtype_name(dtype) == value else None


def DTYPE(value: Any, path: str) -> str | None:  # noqa: N802 (a schema constant)
    """A dtype name (see ``dtype_named``)."""
    return None if dtype_named(value) is not None else f"{path} must name a dtype"


def list_of(item: Schema) -> Schema:
    """A list whose every item conforms to ``item``."""
    def schema(value: Any, path: str) -> str | None:
        if not isinstance(value, list):
            return f"{path} must be a list"
        return next((p for i, v in enumerate(value) if (p := item(v, f"{path}[{i}]")) is not None), None)
    return schema


def map_of(item: Schema) -> Schema:
    """An object whose every value conforms to ``item``."""
    def schema(value: Any, path: str) -> str | None:
        if not isinstance(value, dict):
            return f"{path} must be an object"
        return next((p for k, v in value.items() if (p := item(v, f"{path}.{k}")) is not None), None)
    return schema


def fields(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """An object with the ``required`` keys (and maybe the ``optional`` ones), each conforming; others are allowed."""
    def schema(value: Any, path: str) -> str | None:
        if not isinstance(value, dict):
            return f"{path} must be an object"
        missing = [key for key in required if key not in value]
        if missing:
            return f"{path} lacks {', '.join(map(repr, missing))}"
        checks = {**required, **{k: s for k, s in (optional or {}).items() if k in value}}
        return next((p for key, s in checks.items() if (p := s(value[key], f"{path}.{key}")) is not None), None)
    return schema


def nullable(item: Schema) -> Schema:
    """None, or a value conforming to ``item``."""
    return lambda value, path: None if value is None else item(value, path)


def one_of(*choices: Callable[[], Schema]) -> Schema:
    """A value conforming to one of the schemas (given as functions returning them, so schemas can recurse)."""
    def schema(value: Any, path: str) -> str | None:
        problems = [choice()(value, path) for choice in choices]
        return None if None in problems else " or ".join(p for p in problems if p)
    return schema


SHAPE = list_of(natural)


def check(value: Any, schema: Schema, where: str | Path) -> None:
    """DataLossError naming ``where`` and the first part of ``value`` that does not conform to ``schema``."""
    problem = schema(value, "$")
    if problem is not None:
        raise errors.DataLossError(f"{where} is damaged: {problem} ($ is the file's JSON).")


def parse_json(raw: bytes, where: str | Path) -> Any:
    """``raw`` as JSON (at most ``MAX_JSON_BYTES``); DataLossError naming ``where`` otherwise."""
    if len(raw) > MAX_JSON_BYTES:
        raise errors.DataLossError(f"{where} is larger than {MAX_JSON_BYTES} bytes: not a file mirrorlab wrote.")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise errors.DataLossError(f"{where} is damaged: not valid JSON ({exc}).") from None


def read_json(path: str | Path, schema: Schema, what: str) -> Any:
    """The JSON file at ``path`` (``what`` it is, for messages), checked against ``schema``."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise errors.DataLossError(f"{path} is larger than {MAX_JSON_BYTES} bytes: not a {what}.")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise errors.NotFoundError(f"{path} not found: the {what} is missing.") from None
    except IsADirectoryError:
        raise errors.DataLossError(f"{path} is a directory, not a {what}.") from None
    value = parse_json(raw, path)
    check(value, schema, path)
    return value


def read_npz(source: str | Path | bytes, where: str | Path) -> dict[str, np.ndarray]:
    """Every array of an npz archive (a path, or its bytes), read without pickle; NotFoundError for a missing file,
    DataLossError naming ``where`` for anything that is not a whole archive of plain arrays."""
    try:
        with np.load(io.BytesIO(source) if isinstance(source, bytes) else source, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except FileNotFoundError:
        raise errors.NotFoundError(f"{where} not found: the file is missing.") from None
    except (ValueError, KeyError, OSError, EOFError, MemoryError, zlib.error, zipfile.BadZipFile,
            NotImplementedError, RuntimeError) as exc:  # np.load's and zipfile's errors for damaged archives and
        # headers (a flipped flag reads as an unsupported method or an encrypted member, a flipped shape as a huge one)
        raise errors.DataLossError(f"{where} is damaged or not an npz archive mirrorlab wrote (it never unpickles "
                                   f"data): {type(exc).__name__}: {exc}") from None


def check_array(array: np.ndarray, dtype: str, shape: list[int] | tuple[int, ...] | None, where: str | Path) -> None:
    """DataLossError naming ``where`` unless ``array`` has the ``dtype`` (by name) and ``shape`` (None: any) that
    its manifest declares."""
    if dtype_name(array) != dtype:
        raise errors.DataLossError(f"{where} is damaged: its manifest says dtype {dtype}, the data holds "
                                   f"{dtype_name(array)}.")
    if shape is not None and tuple(array.shape) != tuple(shape):
        raise errors.DataLossError(f"{where} is damaged: its manifest says shape {list(shape)}, the data holds "
                                   f"{list(array.shape)}.")
