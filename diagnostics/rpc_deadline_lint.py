"""Lints Python source for gRPC calls without a deadline: a call with no ``timeout=`` (or ``timeout=None``) waits
forever on a peer behind a dropping firewall, which is how a training job hangs instead of failing.

Found by reading the code (``ast``), never by running it: every call of a multi-callable made by
``channel.unary_unary(...)`` (or ``unary_stream``, ``stream_unary``, ``stream_stream``), directly or through the
name it was assigned to; every method called on a generated stub (``HealthStub(channel).Check(...)``, or
``stub.Check(...)`` after ``stub = HealthStub(channel)``, ``self.stub`` too); and their ``.future(...)`` /
``.with_call(...)``. A long-lived stream that must outlive any deadline (its peer's liveness watched another way,
e.g. by heartbeats) says so on its line: ``# no deadline: why``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Iterable

from mirrorlab.diagnostics.findings import Finding, Severity, register_code

__all__ = ["RPC_WITHOUT_DEADLINE", "EXEMPT", "rpc_calls_without_deadline", "check_rpc_deadlines"]

RPC_WITHOUT_DEADLINE = register_code("ML-LIVE-003", "a gRPC call without a deadline")

_FACTORIES = {"unary_unary", "unary_stream", "stream_unary", "stream_stream"}
_INVOKERS = {"future", "with_call"}
_STUB_SUFFIX = "Stub"  # gRPC's generated client classes: HealthStub, GreeterStub, ...
EXEMPT = "# no deadline:"  # on the call's line, with the reason


def _dotted(node: ast.AST) -> str | None:
    """``stub`` or ``self.stub`` for a name or a chain of attributes on a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _is_factory(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FACTORIES


def _is_stub(node: ast.AST) -> bool:
    """A call of a generated stub class: ``HealthStub(channel)`` or ``health_pb2_grpc.HealthStub(channel)``."""
    if not isinstance(node, ast.Call):
        return False
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    return name.endswith(_STUB_SUFFIX) and name != _STUB_SUFFIX


def _assigned(tree: ast.AST, made_by: Callable[[ast.AST], bool]) -> set[str]:
    """The names (``x``, ``self.x``) assigned the result of a call that ``made_by`` accepts."""
    return {name for node in ast.walk(tree) if isinstance(node, ast.Assign) and made_by(node.value)
            for name in map(_dotted, node.targets) if name is not None}


def rpc_calls_without_deadline(source: str) -> list[int]:
    """Line numbers of the RPCs in ``source`` that pass no ``timeout`` (or ``timeout=None``)."""
    tree = ast.parse(source)
    callables, stubs = _assigned(tree, _is_factory), _assigned(tree, _is_stub)

    def is_rpc(func: ast.AST) -> bool:
        if isinstance(func, ast.Attribute) and func.attr in _INVOKERS:
            func = func.value
        if _is_factory(func) or _dotted(func) in callables:
            return True
        return isinstance(func, ast.Attribute) and (_is_stub(func.value) or _dotted(func.value) in stubs)

    text = source.splitlines()
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and is_rpc(node.func) and EXEMPT not in text[node.lineno - 1]:
            timeout = next((k.value for k in node.keywords if k.arg == "timeout"), None)
            if timeout is None or (isinstance(timeout, ast.Constant) and timeout.value is None):
                lines.append(node.lineno)
    return sorted(lines)


def check_rpc_deadlines(paths: Iterable[Path]) -> list[Finding]:
    """One ML-LIVE-003 per RPC without a deadline in the Python files ``paths``."""
    findings = []
    for path in paths:
        for line in rpc_calls_without_deadline(path.read_text(encoding="utf-8")):
            findings.append(Finding(RPC_WITHOUT_DEADLINE, Severity.ERROR, (), f"{path}:{line} makes a gRPC call "
                                    "without a deadline", f"no timeout= at {path}:{line}",
                                    "Pass timeout= (seconds) to every RPC, so a dropped peer fails the call instead "
                                    "of hanging it."))
    return findings
