"""Draws a catalog scenario's timeline (the spans and instants `mirrorlab trace export` writes) as a PNG for the docs.

Needs matplotlib, which mirrorlab does not depend on: ``pip install matplotlib``, then
``python docs/make_timeline_png.py [SCENARIO] [-o docs/timeline.png]`` (default: the straggler-worker scenario).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from mirrorlab.diagnostics.trace_export import export_loaded  # noqa: E402
from mirrorlab.diagnostics.trace_load import load_trace_texts  # noqa: E402
from mirrorlab.scenarios.catalog import find_scenario  # noqa: E402
from mirrorlab.scenarios.runner import run_scenario  # noqa: E402

COLORS = {"collective": "#4C78A8", "collective,error": "#E45756", "fault": "#F58518", "note": "#9D9D9D"}
MIN_WIDTH = 0.004  # of the time axis: zero-length spans (no latency in the simulator) stay visible


def scenario_timeline(name: str) -> dict:
    """The Chrome trace document of ``name``'s first run (its own seed)."""
    trace = run_scenario(find_scenario(name)).runs[0].trace
    return export_loaded(load_trace_texts([(name, trace.to_jsonl())])).document


def draw(document: dict, title: str, out: Path) -> None:
    """One row per track (worker process, then its notes and replica threads), spans as bars, instants as marks."""
    events = document["traceEvents"]
    workers = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    rows = sorted(threads)
    y = {track: len(rows) - 1 - k for k, track in enumerate(rows)}
    timed = [e for e in events if e["ph"] in "Xi"]
    end = max((e["ts"] + e.get("dur", 0.0) for e in timed), default=1.0) / 1e6 or 1.0
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.1), dpi=100)
    for e in timed:
        row, start = y[(e["pid"], e["tid"])], e["ts"] / 1e6
        if e["ph"] == "X":
            width = max(e["dur"] / 1e6, MIN_WIDTH * end)
            ax.broken_barh([(start, width)], (row - 0.35, 0.7), color=COLORS[e["cat"]], edgecolor="white",
                           linewidth=0.5)
        else:
            ax.plot(start, row, marker="v", color=COLORS[e["cat"]], markersize=8 if e["cat"] == "fault" else 5)
    ax.set_yticks([y[t] for t in rows],
                  [f"{workers[t[0]].split(' (')[0]} · {threads[t]}" for t in rows], fontsize=8)
    ax.set_xlim(-0.01 * end, end * 1.02)
    ax.set_xlabel("virtual seconds" if document["otherData"]["clock"] == "virtual" else "seconds")
    ax.set_title(title, fontsize=10)
    handles = [plt.Line2D([], [], color=c, marker="s" if "collective" in k else "v", linestyle="", label=label)
               for k, c, label in [("collective", COLORS["collective"], "collective"),
                                   ("collective,error", COLORS["collective,error"], "failed collective"),
                                   ("fault", COLORS["fault"], "fault"), ("note", COLORS["note"], "note")]]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=4, fontsize=8, frameon=False)
    ax.grid(axis="x", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario", nargs="?", default="straggler-worker", help="a catalog name or .toml file")
    parser.add_argument("-o", "--output", type=Path, default=Path(__file__).with_name("timeline.png"))
    args = parser.parse_args(argv)
    draw(scenario_timeline(args.scenario), f"scenario {args.scenario}: mirrorlab trace export, drawn", args.output)
    print(f"wrote {args.output} ({args.output.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
