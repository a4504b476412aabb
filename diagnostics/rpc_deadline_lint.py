"""Lints Python source for gRPC calls without a deadline: a call with no ``timeout=`` (or ``timeout=None``) waits
forever on a peer behind a dropping firewall, which is how a training job hangs instead of failing.

Found by reading the code (``ast``), never by running it: every call of a multi-callable made by
``channel.unary_unary(...)`` (or ``unary_stream``, ``stream_unary``, ``stream_stream``), directly or through the
name it was assigned to, and its ``.future(...)`` / ``.with_call(...)``. A long-lived stream that must outlive any
deadline (its peer's liveness watched another way, e.g. by heartbeats) says so on its line: ``# no deadline: why``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable

from mirrorlab.diagnostics.findings import Finding, Severity, register_code

__all__ = ["RPC_WITHOUT_DEADLINE", "EXEMPT", "rpc_calls_without_deadline", "check_rpc_deadlines"]

RPC_WITHOUT_DEADLINE = register_code("ML-LIVE-003", "a gRPC call without a deadline")

_FACTORIES = {"unary_unary", "unary_stream", "stream_unary", "stream_stream"}
_INVOKERS = {"future", "with_call"}
EXEMPT = "# no deadline:"  # on the call's line, with the reason


def _is_factory(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FACTORIES


def rpc_calls_without_deadline(source: str) -> list[int]:
    """Line numbers of the RPCs in ``source`` that pass no ``timeout`` (or ``timeout=None``)."""
    tree = ast.parse(source)
    callables = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _is_factory(node.value)
                 for target in node.targets if isinstance(target, ast.Name)}

    def is_rpc(func: ast.AST) -> bool:
        if isinstance(func, ast.Attribute) and func.attr in _INVOKERS:
            func = func.value
        return _is_factory(func) or (isinstance(func, ast.Name) and func.id in callables)

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
