"""The ``checkpoint`` state file of a directory (TF's CheckpointState text proto) and the readers built on it:
``latest_checkpoint``, ``get_checkpoint_state`` and ``checkpoints_iterator``."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mirrorlab.runtime import clock
from .files import atomic_write

__all__ = ["CheckpointState", "STATE_FILE", "checkpoint_files", "checkpoints_iterator", "get_checkpoint_state",
           "latest_checkpoint", "write_checkpoint_state"]

log = logging.getLogger("mirrorlab")

STATE_FILE = "checkpoint"
POLL_SECONDS = 1.0  # how often checkpoints_iterator looks for a new checkpoint, as TF


def checkpoint_files(prefix: str | os.PathLike) -> tuple[Path, Path]:
    """The data file and the manifest of the checkpoint at ``prefix`` (complete once the manifest exists)."""
    return Path(f"{prefix}.npz"), Path(f"{prefix}.index.json")


@dataclass
class CheckpointState:
    """What a ``checkpoint`` file records (TF's CheckpointState); relative paths are joined to the directory."""

    model_checkpoint_path: str
    all_model_checkpoint_paths: list[str] = field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = field(default_factory=list)
    last_preserved_timestamp: float = 0.0


_LINE = re.compile(r'^(\w+)\s*:\s*(?:"((?:[^"\\]|\\.)*)"|([^\s"]+))\s*(?:#.*)?$')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPED = re.compile(r"\\([0-7]{1,3}|x[0-9a-fA-F]{1,2}|.)")
_UNESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}


def _quoted(text: str) -> str:
    """A string as the text proto writes it (UTF-8 kept, quotes, backslashes and controls escaped)."""
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in text) + '"'


def _unquoted(text: str) -> str:
    """The string a text-proto string literal's contents spell (octal, hex and C escapes)."""
    def byte(match: re.Match[str]) -> str:
        """One escape as the latin-1 character of its byte (re-decoded as UTF-8 below)."""
        code = match.group(1)
        if code[0] in "01234567":
            return chr(int(code, 8) & 0xFF)
        if code[0] == "x" and len(code) > 1:
            return chr(int(code[1:], 16))
        return _UNESCAPES.get(code, code.encode()).decode("latin-1")
    raw = _ESCAPED.sub(byte, text.encode("utf-8").decode("latin-1"))
    return raw.encode("latin-1").decode("utf-8", errors="replace")


def get_checkpoint_state(checkpoint_dir: str | os.PathLike,
                         latest_filename: str | None = None) -> CheckpointState | None:
    """The directory's state file (``latest_filename``, default ``checkpoint``), None if there is none or it
    cannot be parsed (logged, as TF logs and ignores it); ValueError if it names no latest checkpoint, as TF."""
    directory = os.fspath(checkpoint_dir)
    path = Path(directory) / (latest_filename or STATE_FILE)
    if not path.is_file():
        return None
    fields: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            return _ignored(path, f"cannot parse the line {line[:80]!r}")
        fields.setdefault(match.group(1), []).append(
            _unquoted(match.group(2)) if match.group(2) is not None else match.group(3))
    try:
        stamps = [float(t) for t in fields.get("all_model_checkpoint_timestamps", [])]
        preserved = float(fields.get("last_preserved_timestamp", ["0"])[-1])
    except ValueError as exc:
        return _ignored(path, f"a timestamp is not a number ({exc})")
    latest = fields.get("model_checkpoint_path", [""])[-1]
    if not latest:
        raise ValueError("Invalid checkpoint state loaded from " + directory)

    def joined(p: str) -> str:
        """``p`` inside the directory unless absolute."""
        return p if os.path.isabs(p) else os.path.join(directory, p)

    return CheckpointState(joined(latest), [joined(p) for p in fields.get("all_model_checkpoint_paths", [])],
                           stamps, preserved)


def _ignored(path: Path, problem: str) -> None:
    """Log why the state file at ``path`` is ignored (TF logs its parse error and reads no state)."""
    log.warning("%s: %s; checkpoint state ignored (a CheckpointManager recovers the newest complete checkpoint "
                "from the files themselves)", path, problem)


def write_checkpoint_state(directory: str, latest: str, paths: list[str], timestamps: list[float] | None = None,
                           last_preserved: float = 0.0) -> None:
    """Write the directory's state file atomically, with paths relative to it (as TF's savers do)."""
    def rel(p: str) -> str:
        """``p`` relative to the directory."""
        return os.path.relpath(p, directory)

    text = f"model_checkpoint_path: {_quoted(rel(latest))}\n"
    text += "".join(f"all_model_checkpoint_paths: {_quoted(rel(p))}\n" for p in paths)
    text += "".join(f"all_model_checkpoint_timestamps: {t!r}\n" for t in timestamps or [])
    if last_preserved:  # a proto field at its default (0) is not written
        text += f"last_preserved_timestamp: {last_preserved!r}\n"
    atomic_write(Path(directory) / STATE_FILE, text.encode())


def latest_checkpoint(checkpoint_dir: str | os.PathLike, latest_filename: str | None = None) -> str | None:
    """The checkpoint the directory's state file (``latest_filename``, default ``checkpoint``) names as the
    latest, if it is complete; else None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not checkpoint_files(state.model_checkpoint_path)[1].exists():
        return None
    return state.model_checkpoint_path


def checkpoints_iterator(checkpoint_dir: str | os.PathLike, min_interval_secs: float = 0, timeout: float | None = None,
                         timeout_fn: Callable[[], bool] | None = None) -> Iterator[str]:
    """Each new latest checkpoint of the directory as it appears (TF's generator): waits at most ``timeout``
    seconds for the next one, then stops unless ``timeout_fn`` returns False."""
    last = None
    while True:
        found = _wait_for_new_checkpoint(checkpoint_dir, last, timeout)
        if found is None:
            if timeout_fn is None or timeout_fn():
                return
            continue
        start = clock.now()
        last = found
        yield found
        clock.sleep(max(0.0, start + min_interval_secs - clock.now()))


def _wait_for_new_checkpoint(checkpoint_dir: str | os.PathLike, last: str | None, timeout: float | None) -> str | None:
    """The latest checkpoint once it differs from ``last``; None after ``timeout`` seconds."""
    deadline = None if timeout is None else clock.now() + timeout
    while True:
        found = latest_checkpoint(checkpoint_dir)
        if found is not None and found != last:
            return found
        if deadline is not None and clock.now() + POLL_SECONDS > deadline:
            return None
        clock.sleep(POLL_SECONDS)
