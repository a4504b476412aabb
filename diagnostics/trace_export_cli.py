"""``mirrorlab trace export FILE... -o OUT.json``: simulator traces or flight-recorder dumps as a Chrome trace
timeline (open it in https://ui.perfetto.dev or chrome://tracing).

Damaged input is exported as far as it can be read, with a warning per problem on stderr. Exit status: 0 the
timeline was written, 2 nothing could be read or OUT could not be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mirrorlab.diagnostics.trace_export import export_trace_files

__all__ = ["register_export"]

UNUSABLE = 2


def register_export(actions: argparse._SubParsersAction) -> None:
    """Adds ``export`` to the ``mirrorlab trace`` subcommands ``actions``."""
    export = actions.add_parser(
        "export", description=__doc__,
        help="convert trace files to a Chrome trace / Perfetto timeline (exit 0 written, 2 unusable input)")
    export.add_argument("paths", nargs="+", metavar="FILE",
                        help="trace files of one run: the simulator's single file, or one flight-recorder dump "
                             "per worker")
    export.add_argument("-o", "--output", required=True, metavar="OUT.json", help="where to write the timeline")
    export.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    timeline = export_trace_files(args.paths)
    for finding in timeline.findings:
        print(f"mirrorlab trace export: {finding.severity.value}: [{finding.code}] {finding.message}",
              file=sys.stderr)
    for why in timeline.skipped:
        print(f"mirrorlab trace export: warning: left off {why}", file=sys.stderr)
    if not timeline.readable:
        print("mirrorlab trace export: error: no readable trace among the files given; nothing written. Fix: pass "
              "files written by RunResult.trace.save() or a worker's flight recorder.", file=sys.stderr)
        return UNUSABLE
    out = Path(args.output)
    partial = out.with_name(out.name + ".partial")
    try:
        partial.write_text(timeline.to_json(), encoding="utf-8")
        os.replace(partial, out)  # a reader never sees half a timeline
    except OSError as exc:
        print(f"mirrorlab trace export: error: cannot write {out}: {exc.strerror or exc}. Fix: choose a writable "
              "-o path.", file=sys.stderr)
        return UNUSABLE
    workers = sum(1 for e in timeline.document["traceEvents"] if e["name"] == "process_name")
    instants = sum(1 for e in timeline.document["traceEvents"] if e["ph"] == "i")
    print(f"wrote {out}: {timeline.spans} collective spans and {instants} notes/faults on {workers} worker(s); "
          "open it in https://ui.perfetto.dev")
    return 0
