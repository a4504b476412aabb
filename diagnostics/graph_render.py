"""Writes the reachability graph to a file: DOT always; PNG or SVG through Graphviz's ``dot`` when installed, else
matplotlib when importable."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import networkx as nx

from mirrorlab.diagnostics.reachability import to_dot

__all__ = ["write_graph"]

_PICTURES = (".png", ".svg")
_DOT_TIMEOUT_S = 30


def write_graph(graph: nx.DiGraph, path: str) -> str | None:
    """Writes ``graph`` to ``path`` (by its suffix: .dot, .png, .svg); returns why it could not, or None."""
    suffix = Path(path).suffix.lower()
    dot = to_dot(graph)
    try:
        if suffix in ("", ".dot", ".gv"):
            Path(path).write_text(dot, encoding="utf-8")
            return None
        if suffix not in _PICTURES:
            return f"--graph {path}: the suffix must be .dot, .png or .svg"
        if shutil.which("dot"):
            done = subprocess.run(["dot", f"-T{suffix[1:]}", "-o", path], input=dot, text=True, capture_output=True,
                                  timeout=_DOT_TIMEOUT_S)
            return None if done.returncode == 0 else f"graphviz dot failed: {done.stderr.strip()}"
        if importlib.util.find_spec("matplotlib") is not None:
            _draw_with_matplotlib(graph, path)
            return None
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"cannot write --graph {path}: {err}"
    return (f"--graph {path}: a {suffix[1:].upper()} needs Graphviz (apt-get install graphviz) or matplotlib "
            "(pip install matplotlib); write a .dot file instead")


def _draw_with_matplotlib(graph: nx.DiGraph, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(6, 4))
    colours = ["green" if status == "ok" else "red" for _, _, status in graph.edges(data="status")]
    nx.draw_networkx(graph, pos=nx.circular_layout(graph), edge_color=colours, node_color="lightgray",
                     connectionstyle="arc3,rad=0.1")
    figure.savefig(path)
    plt.close(figure)
