"""``mirrorlab trace analyze FILE... [--json]``: explain desyncs, hangs and NaNs from collective traces;
``mirrorlab trace export FILE... -o OUT.json``: the same traces as a timeline for Perfetto (``trace_export_cli``).

Exit status of analyze: 0 nothing wrong (warnings allowed), 1 the run went wrong (a desync, hang, NaN...), 2 the
input itself is unusable (no readable trace).
"""

from __future__ import annotations

import argparse
import sys

from mirrorlab.diagnostics.findings import exit_code, render_text, to_json
from mirrorlab.diagnostics.trace_analysis import analyze_trace_files
from mirrorlab.diagnostics.trace_export_cli import register_export

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    """Adds ``trace analyze`` and ``trace export`` to the ``mirrorlab`` parser's ``commands``."""
    trace = commands.add_parser("trace", help="analyze collective traces or export them as timelines "
                                              "(see `mirrorlab trace analyze -h`, `mirrorlab trace export -h`)",
                                description="Work with the collective traces of simulated or real runs.")
    actions = trace.add_subparsers(dest="trace_command", required=True)
    analyze = actions.add_parser(
        "analyze", description=__doc__,
        help="explain desyncs, hangs and NaNs in trace files (exit 0 pass, 1 a problem, 2 unusable input)")
    analyze.add_argument("paths", nargs="+", metavar="FILE",
                         help="trace files of one run: the simulator's single file, or one file per worker")
    analyze.add_argument("--json", action="store_true", help="print the findings as JSON")
    analyze.set_defaults(func=_analyze)
    register_export(actions)


def _analyze(args: argparse.Namespace) -> int:
    findings = analyze_trace_files(args.paths)
    if args.json:
        print(to_json(findings))
    else:
        sys.stdout.write(render_text(findings, stream=sys.stdout))
    return exit_code(findings)
