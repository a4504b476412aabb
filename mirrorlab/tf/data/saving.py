"""``Dataset.save`` / ``Dataset.load``: a dataset's elements written to a directory and read back lazily.

The layout is mirrorlab's own, never pickle: ``dataset_spec.json`` (element spec, element count, shard indices) and
per shard ``shard_<index>/chunk_<k>.npz`` files of up to ``CHUNK`` elements, each component stored as its values
concatenated, its shapes, and (strings) its byte lengths. As TF: ``shard_func`` picks each element's shard, the
default keeps one shard, and the default reader interleaves the shards with one cycle per CPU. A save is written to
a temporary directory and renamed into place, so a crash never leaves a half-written dataset that loads.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ... import errors, nest
from ...train.file_checks import (DTYPE, Schema, check, check_array, fields, kind, list_of, map_of, natural,
                                 nullable, one_of, read_json, read_npz)
from ...train.strings import decode_strings, encode_strings
from .dataset import Dataset, TensorSpec
from .sources import ElementsDataset, SourceDataset
from .tensors import STRING, call, is_string

__all__ = ["save_dataset", "load_dataset", "LoadDataset", "ChunkFilesDataset", "write_chunk", "spec_json",
           "spec_from_json", "shard_index", "chunk_paths", "CHUNK", "SPEC_FILE", "SPEC_SCHEMA"]

SPEC_FILE = "dataset_spec.json"
FORMAT = "mirrorlab.data.save/1"
CHUNK = 1024  # elements per chunk file


def spec_json(spec: Any) -> Any:
    """The element spec as JSON: tuples, lists and dicts of ``{"shape", "dtype"}``."""
    if isinstance(spec, TensorSpec):
        return {"shape": None if spec.shape is None else list(spec.shape),
                "dtype": "string" if spec.dtype == STRING else spec.dtype.name}
    if isinstance(spec, dict):
        return {"dict": [[key, spec_json(value)] for key, value in spec.items()]}
    if type(spec) in (tuple, list):
        return {type(spec).__name__: [spec_json(value) for value in spec]}
    raise TypeError(f"Dataset.save and snapshot cannot write elements structured as {type(spec).__name__}: use "
                    "tuples, lists and dicts of tensors.")


def _pair(value: Any, path: str) -> str | None:
    """A dict spec's ``[key, spec]``."""
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
        return f"{path} must be a [key, spec] pair"
    return SPEC_SCHEMA(value[1], f"{path}[1]")


def _spec_schema(value: Any, path: str) -> str | None:
    """What ``spec_json`` writes: a tensor's shape and dtype, or a dict, tuple or list of specs."""
    return _SPEC_CHOICES(value, path)


SPEC_SCHEMA: Schema = _spec_schema
_SPEC_CHOICES = one_of(lambda: fields({"shape": nullable(list_of(nullable(natural))), "dtype": DTYPE}),
                       lambda: fields({"dict": list_of(_pair)}), lambda: fields({"tuple": list_of(SPEC_SCHEMA)}),
                       lambda: fields({"list": list_of(SPEC_SCHEMA)}))
_METADATA = fields({"format": kind(str), "element_spec": SPEC_SCHEMA, "cardinality": natural,
                    "shards": map_of(natural)}, {"compression": nullable(kind(str))})


def spec_from_json(structure: Any) -> Any:
    """The element spec written by ``spec_json`` (checked against ``SPEC_SCHEMA`` by the readers)."""
    if "dtype" in structure:
        return TensorSpec(structure["shape"], STRING if structure["dtype"] == "string" else structure["dtype"])
    if "dict" in structure:
        return {key: spec_from_json(value) for key, value in structure["dict"]}
    kind = "tuple" if "tuple" in structure else "list"
    return (tuple if kind == "tuple" else list)(spec_from_json(value) for value in structure[kind])


def shard_index(shard_func: Callable, element: Any, op: str) -> int:
    """``shard_func(element)``, which must be a scalar int64 (TF's ``op`` kernel refuses anything else)."""
    index = np.asarray(call(shard_func, element))
    if index.shape != () or index.dtype != np.int64:
        raise errors.InvalidArgumentError(f"`shard_func` must return a scalar int64. [Op:{op}]\nFix: return "
                                          "e.g. `tf.cast(x % n, tf.int64)`.")
    return int(index)


def write_chunk(path: Path, rows: list[Any], compress: bool) -> None:
    """``rows`` (elements) as one npz: per component its values concatenated, ``c<j>_values`` (strings encoded as a
    checkpoint's are), and their shapes, ``c<j>_shapes``."""
    arrays: dict[str, np.ndarray] = {}
    for j, parts in enumerate(zip(*(nest.flatten(row) for row in rows))):
        parts = [np.asarray(p) for p in parts]
        if len({p.ndim for p in parts}) != 1:
            raise errors.InvalidArgumentError(f"Component {j} of the elements changes rank: Dataset.save needs one "
                                              "rank per component.")
        arrays[f"c{j}_shapes"] = np.array([p.shape for p in parts], np.int64).reshape(len(parts), parts[0].ndim)
        values = np.concatenate([p.ravel() for p in parts])
        arrays[f"c{j}_values"] = encode_strings(values) if is_string(values.dtype) else values
    (np.savez_compressed if compress else np.savez)(path, **arrays)


def _read_chunk(path: Path, spec: Any, saved: Any) -> Iterator[Any]:
    """The elements of one chunk file, in the structure of ``spec``; the data is checked against the ``saved`` spec
    (DataLossError naming the file), then against ``spec`` where the caller gave another (TF's error)."""
    chunk = read_npz(path, path)
    columns = []
    rows = None
    for j, (component, declared) in enumerate(zip(nest.flatten(spec), nest.flatten(saved))):
        shapes, values = _component(chunk, j, declared, path)
        rows = len(shapes) if rows is None else rows
        if len(shapes) != rows:
            raise errors.DataLossError(f"{path} is damaged: component {j} has {len(shapes)} elements, component 0 "
                                       f"{rows}.")
        if values.dtype != component.dtype:
            raise errors.InvalidArgumentError(f"Data type mismatch at component {j}: expected "
                                              f"{component.dtype.name} but got {values.dtype.name}.")
        offsets = np.concatenate([[0], np.cumsum([math.prod(s) for s in shapes], dtype=np.int64)])
        columns.append([values[offsets[i]:offsets[i + 1]].reshape(tuple(shapes[i])) for i in range(len(shapes))])
    for parts in zip(*columns):
        yield nest.pack_sequence_as(spec, list(parts))


def _component(chunk: dict[str, np.ndarray], j: int, declared: TensorSpec, path: Path) -> tuple[list, np.ndarray]:
    """Component ``j``'s element shapes and values, checked against the spec it was saved with."""
    where = f"{path}, component {j}"
    if f"c{j}_shapes" not in chunk or f"c{j}_values" not in chunk:
        raise errors.DataLossError(f"{where} is damaged: the chunk lacks the component's arrays.")
    shapes = chunk[f"c{j}_shapes"]
    rank = None if declared.shape is None else len(declared.shape)
    if shapes.dtype != np.int64 or shapes.ndim != 2 or (rank is not None and shapes.shape[1] != rank) or (
            shapes < 0).any():
        raise errors.DataLossError(f"{where} is damaged: the element shapes are {shapes.dtype} {list(shapes.shape)}, "
                                   f"not int64 sizes of rank {rank}.")
    if declared.shape is not None and any(d is not None and (shapes[:, i] != d).any()
                                          for i, d in enumerate(declared.shape)):
        raise errors.DataLossError(f"{where} is damaged: an element's shape is not the saved {declared.shape}.")
    shapes = shapes.tolist()
    count = sum(math.prod(s) for s in shapes)
    values = chunk[f"c{j}_values"]
    if declared.dtype == STRING:
        return shapes, decode_strings(values, [count], where)
    check_array(values, declared.dtype.name, [count], where)
    return shapes, values


def save_dataset(dataset: Dataset, path: str, compression: str | None = None, shard_func: Callable | None = None,
                 checkpoint_args: Any = None) -> None:
    """Write every element of ``dataset`` under ``path`` (replacing what is there), sharded by ``shard_func``."""
    if checkpoint_args is not None:
        raise ValueError("Dataset.save(checkpoint_args=...) is not supported: mirrorlab writes the whole dataset to "
                         "a temporary directory and renames it into place, so an interrupted save leaves the previous "
                         "one intact; run the save again instead of resuming it.")
    if compression not in (None, "", "GZIP"):
        raise errors.InvalidArgumentError(f"Unsupported compression {compression!r}: use None or 'GZIP'.")
    spec = dataset.element_spec
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.saving-", dir=target.parent))
    try:
        pending: dict[int, list[Any]] = {}
        chunks: dict[int, int] = {}
        count = 0
        for element in dataset:
            shard = 0 if shard_func is None else shard_index(shard_func, element, "SaveDataset")
            rows = pending.setdefault(shard, [])
            rows.append(element)
            count += 1
            if len(rows) == CHUNK:
                _flush(work, shard, chunks, rows, compression == "GZIP")
        for shard, rows in pending.items():
            if rows:
                _flush(work, shard, chunks, rows, compression == "GZIP")
        metadata = {"format": FORMAT, "element_spec": spec_json(spec), "cardinality": count,
                    "shards": {str(shard): n for shard, n in sorted(chunks.items())}, "compression": compression}
        (work / SPEC_FILE).write_text(json.dumps(metadata))
        _replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _flush(work: Path, shard: int, chunks: dict[int, int], rows: list[Any], compress: bool) -> None:
    folder = work / f"shard_{shard}"
    folder.mkdir(exist_ok=True)
    k = chunks.get(shard, 0)
    write_chunk(folder / f"chunk_{k:08d}.npz", rows, compress)
    chunks[shard] = k + 1
    rows.clear()


def _replace(work: Path, target: Path) -> None:
    """Move the finished save into place: the old one is moved aside first and removed only afterwards."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.replaced-{os.getpid()}")
        target.rename(old)
    work.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class LoadDataset(SourceDataset):
    """The elements of a saved dataset, read chunk by chunk through ``reader_func`` over its shards."""

    def __init__(self, path: str, element_spec: Any = None, compression: str | None = None,
                 reader_func: Callable | None = None) -> None:
        self.path = Path(path)
        spec_file = self.path / SPEC_FILE
        if not spec_file.is_file():
            raise errors.NotFoundError(f"tf.data snapshot element_spec file not found: {spec_file}.\nFix: pass the "
                                       "directory a Dataset.save wrote.")
        metadata = read_json(spec_file, kind(dict), "saved dataset's spec")
        if metadata.get("format") != FORMAT:
            raise errors.DataLossError(f"{spec_file} was not written by mirrorlab's Dataset.save ({FORMAT}).")
        check(metadata, _METADATA, spec_file)
        if not all(re.fullmatch(r"-?\d+", shard) for shard in metadata["shards"]):
            raise errors.DataLossError(f"{spec_file} is damaged: a shard is not named by its index.")
        self.saved_spec = spec_from_json(metadata["element_spec"])
        self.spec = self.saved_spec if element_spec is None else element_spec
        self.count = int(metadata["cardinality"])
        self.shards = sorted((int(shard), n) for shard, n in metadata["shards"].items())
        self.reader_func = reader_func
        self.saved_compression = metadata.get("compression") or None
        self.compression_mismatch = self.saved_compression != (compression or None)

    def _shard(self, shard: int, chunks: int) -> Dataset:
        return ChunkFilesDataset(chunk_paths(self.path / f"shard_{shard}", chunks, "chunk_{:08d}.npz",
                                             self.path / SPEC_FILE), self.spec, self.saved_spec)

    def _read(self) -> Dataset:
        datasets = ElementsDataset([self._shard(*s) for s in self.shards], None)
        if self.reader_func is not None:
            return self.reader_func(datasets)
        return datasets.interleave(lambda shard: shard, cycle_length=os.cpu_count() or 1)

    def _iterate(self) -> Iterator[Any]:
        if self.compression_mismatch and self.count:  # TF reads the files as the other compression: garbage
            raise errors.DataLossError("corrupted record at 0 (Is this even a TFRecord file?)\nFix: load with the "
                                       f"compression the dataset was saved with ({self.path / SPEC_FILE} names "
                                       f"{self.saved_compression!r}).")
        return iter(self._read())

    def _cardinality(self) -> int:
        return self.count  # as TF, whatever the reader_func

    @property
    def element_spec(self) -> Any:
        return self.spec


def chunk_paths(folder: Path, count: int, pattern: str, listed_in: Path) -> list[Path]:
    """The ``count`` chunk files of a shard (``pattern`` formats each index); DataLossError naming the metadata file
    ``listed_in`` where the folder holds fewer files than it lists."""
    held = len(os.listdir(folder)) if folder.is_dir() else 0
    if count > held:
        raise errors.DataLossError(f"{listed_in} is damaged: it lists {count} chunk files in {folder}, which holds "
                                   f"{held}.")
    return [folder / pattern.format(k) for k in range(count)]


class ChunkFilesDataset(SourceDataset):
    """Chunk files (one shard's), read one at a time, yielding elements of ``spec``; the data is checked against
    the spec it was ``saved`` with (by default ``spec``)."""

    def __init__(self, files: list[Path], spec: Any, saved: Any = None) -> None:
        self.files = files
        self.spec = spec
        self.saved = spec if saved is None else saved

    def _iterate(self) -> Iterator[Any]:
        for path in self.files:
            yield from _read_chunk(path, self.spec, self.saved)

    @property
    def element_spec(self) -> Any:
        return self.spec


def load_dataset(path: str, element_spec: Any = None, compression: str | None = None,
                 reader_func: Callable | None = None) -> Dataset:
    """A dataset of what ``save_dataset`` wrote at ``path``; as TF, ``compression`` must be the one it was saved with
    (else reading raises DataLossError)."""
    return LoadDataset(path, element_spec, compression, reader_func)
