"""``Dataset.snapshot``: TF 2.21's SnapshotDatasetV2. The first pass that reaches the input's end writes what it
yields under ``path``; every later pass (in this process or the next run of the program) reads that instead of
computing the input again, so, for example, a reshuffling shuffle before it gives the same order each epoch.

Layout, mirrorlab's own (never pickle): ``path/<fingerprint>/snapshot.metadata.json`` names the finished run,
``path/<fingerprint>/<run id>/<shard>.shard/<chunk>.snapshot.npz`` hold its elements (saving.py's chunk format).
The fingerprint describes the input pipeline (fingerprint.py), so another pipeline snapshotted at the same path
gets its own directory, as in TF. As TF's, a pass that stops before the end leaves no finished snapshot (the next
pass writes one); mirrorlab also removes that pass's files. The metadata is replaced atomically after every chunk
is on disk, so a crash never leaves a snapshot that reads back incomplete.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ... import errors, nest
from ...train.file_checks import Schema, fields, kind, map_of, natural, nullable, read_json
from ...train.files import atomic_write
from .dataset import Dataset, TensorSpec, UnaryDataset
from .failures import Failed, attempt, elements
from .fingerprint import fingerprint
from .saving import CHUNK, SPEC_SCHEMA, ChunkFilesDataset, chunk_paths, shard_index, spec_from_json, spec_json, write_chunk
from .sources import ElementsDataset
from .tensors import call

__all__ = ["SnapshotDataset"]

log = logging.getLogger("mirrorlab")

METADATA = "snapshot.metadata.json"
FORMAT = "mirrorlab.data.snapshot/1"
_SHARD_SPECS = (TensorSpec((), np.int64), TensorSpec((), np.int32))


def _matching(pattern: str) -> Schema:
    """A string that fully matches ``pattern`` (names that become paths: no separators, no ``..``)."""
    return lambda value, path: None if isinstance(value, str) and re.fullmatch(pattern, value) else \
        f"{path} must match {pattern}"


def _shards(value: Any, path: str) -> str | None:
    """Chunk counts by shard directory name."""
    problem = map_of(natural)(value, path)
    return problem or next((f"{path} has the shard name {name!r}" for name in value
                            if not re.fullmatch(r"\d{8}\.shard", name)), None)


_METADATA = fields({"format": kind(str), "run_id": _matching(r"\d+"), "finalized": kind(bool),
                    "element_spec": SPEC_SCHEMA, "shards": _shards}, {"compression": nullable(kind(str))})


class SnapshotDataset(UnaryDataset):
    """The input's elements, written on the first complete pass and read back on the later ones."""

    _stops_file_sharding = True  # TF's FILE auto-sharding does not walk through a snapshot

    def __init__(self, input_dataset: Dataset, path: str | os.PathLike, compression: str | None = "AUTO",
                 reader_func: Callable[[Dataset], Dataset] | None = None,
                 shard_func: Callable[..., Any] | None = None) -> None:
        super().__init__(input_dataset)
        self.path = os.fsdecode(path)
        self.compression = compression
        self.reader_func = reader_func
        self.shard_func = shard_func
        if shard_func is not None:
            returned = self._traced(lambda element: nest.map_structure(TensorSpec.of, call(shard_func, element)))
            if returned is not None and returned not in _SHARD_SPECS:
                raise TypeError(f"Invalid `shard_func`. `shard_func` must return `tf.int64` scalar tensor but its "
                                f"return type is {returned}.")

    def _directory(self) -> Path:
        """``path/<fingerprint of the input>``, hashed once per input (a graph rewrite gives a clone another input)."""
        hashed = self.__dict__.get("_hashed")
        if hashed is None or hashed[0] is not self._input:
            hashed = self._hashed = (self._input, Path(self.path) / fingerprint(self._input))
        return hashed[1]

    def _finished(self) -> dict[str, Any] | None:
        """The metadata of this pipeline's finished snapshot, if there is one; metadata that is damaged (not
        JSON, not the schema) is logged and counts as none, so the snapshot is written again."""
        path = self._directory() / METADATA
        if not path.is_file():
            return None
        try:
            metadata = read_json(path, _METADATA, "snapshot's metadata")
        except errors.DataLossError as exc:
            log.warning("%s; the snapshot is written again", exc.message)
            return None
        return metadata if metadata["format"] == FORMAT and metadata["finalized"] else None

    def _iterate(self) -> Iterator[Any]:
        metadata = self._finished()
        return self._read(metadata) if metadata is not None else self._write()

    def _initialize_iterators(self) -> None:
        if self._finished() is None:  # a finished snapshot is read without creating the input's iterator
            super()._initialize_iterators()

    def _read(self, metadata: dict[str, Any]) -> Iterator[Any]:
        """The finished run's shards (in the order of their names) through ``reader_func``; by default they are
        interleaved one element at a time, which gives back the written order (TF's default)."""
        run = self._directory() / metadata["run_id"]
        spec = spec_from_json(metadata["element_spec"])
        shards = ElementsDataset(
            [ChunkFilesDataset(chunk_paths(run / name, chunks, "{:08d}.snapshot.npz", self._directory() / METADATA),
                               spec)
             for name, chunks in sorted(metadata["shards"].items())], None)
        if self.reader_func is not None:
            return iter(self.reader_func(shards))
        return iter(shards.interleave(lambda shard: shard, cycle_length=os.cpu_count() or 1))

    def _write(self) -> Iterator[Any]:
        """The input's elements, each also written to its shard (``shard_func``'s, or its index modulo the number
        of CPUs, TF's default); at the input's end the run becomes the finished snapshot."""
        directory = self._directory()
        run_id = str(secrets.randbits(64))
        run = directory / run_id
        run.mkdir(parents=True)
        spec = spec_json(self._input.element_spec)
        _write_metadata(directory, run_id, spec, {}, self.compression, finalized=False)
        pending: dict[str, list[Any]] = {}
        chunks: dict[str, int] = {}
        cpus = os.cpu_count() or 1
        finished = False
        try:
            for index, element in enumerate(elements(self._input)):
                if type(element) is Failed:
                    yield element
                    continue
                shard = index % cpus if self.shard_func is None else attempt(
                    shard_index, self.shard_func, element, "SnapshotDatasetV2")
                if type(shard) is Failed:
                    yield shard
                    continue
                name = f"{shard:08d}.shard"
                rows = pending.setdefault(name, [])
                rows.append(element)
                if len(rows) == CHUNK:
                    self._flush(run, name, rows, chunks)
                yield element
            for name, rows in pending.items():
                if rows:
                    self._flush(run, name, rows, chunks)
            _write_metadata(directory, run_id, spec, chunks, self.compression, finalized=True)
            finished = True
        finally:
            if not finished:  # an unfinished pass: TF leaves its files, which nothing reads again
                shutil.rmtree(run, ignore_errors=True)

    def _flush(self, run: Path, name: str, rows: list[Any], chunks: dict[str, int]) -> None:
        folder = run / name
        folder.mkdir(exist_ok=True)
        k = chunks.get(name, 0)
        path = folder / f"{k:08d}.snapshot.npz"
        write_chunk(path, rows, self.compression == "GZIP")
        with open(path, "rb") as handle:  # on disk before the metadata names it
            os.fsync(handle.fileno())
        chunks[name] = k + 1
        rows.clear()


def _write_metadata(directory: Path, run_id: str, spec: dict[str, Any], chunks: dict[str, int], compression: str | None,
                    finalized: bool) -> None:
    metadata = {"format": FORMAT, "run_id": run_id, "finalized": finalized, "element_spec": spec,
                "shards": chunks, "compression": compression}
    atomic_write(directory / METADATA, json.dumps(metadata).encode())
