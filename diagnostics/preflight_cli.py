"""``mirrorlab preflight``: run on every worker before training (or as a Kubernetes init container) to prove
the cluster can talk, within a bounded time. Exit status: 0 pass, 1 a check failed, 2 invalid TF_CONFIG.
"""

from __future__ import annotations

import argparse
import os
import sys

import networkx as nx

from mirrorlab.diagnostics.diagnose import MAX_INPUT_BYTES
from mirrorlab.diagnostics.findings import exit_code, render_text, to_json
from mirrorlab.diagnostics.graph_render import write_graph
from mirrorlab.diagnostics.preflight import preflight
from mirrorlab.diagnostics.preflight_merge import ReportError, merge_reports

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    """Adds the ``preflight`` subcommand to the ``mirrorlab`` parser's ``commands``."""
    parser = commands.add_parser(
        "preflight", help="serve a probe on this task's address and probe every peer (exit 0 pass, 1 fail, 2 invalid)",
        description=__doc__)
    parser.add_argument("--tf-config", metavar="FILE", help="read TF_CONFIG from FILE instead of the environment")
    parser.add_argument("--timeout", type=float, default=2.0, metavar="S",
                        help="deadline of each probe stage, seconds (default 2); no answer by then is 'filtered'")
    parser.add_argument("--wait", type=float, default=0.0, metavar="S",
                        help="gang window: retry peers that are not up yet (refused, not in DNS, not serving) for S seconds")
    parser.add_argument("--linger", type=float, default=None, metavar="S",
                        help="keep answering peers' probes S seconds after probing (default: --wait)")
    parser.add_argument("--bulk-mib", type=float, default=4.0, metavar="MIB",
                        help="MiB sent to each peer to measure bandwidth (default 4; 0: latency only)")
    parser.add_argument("--model-bytes", type=int, default=None, metavar="BYTES",
                        help="predict the ring all-reduce time of a model this many bytes big from the measured links")
    parser.add_argument("--collective-timeout", type=float, default=None, metavar="S",
                        help="the training's CommunicationOptions.timeout_seconds, to check the timeouts' order")
    parser.add_argument("--job-timeout", type=float, default=None, metavar="S",
                        help="the job's own deadline (e.g. Kubernetes activeDeadlineSeconds), to check the order")
    parser.add_argument("--graph", metavar="FILE", help="write the reachability graph to FILE (.dot; .png or .svg "
                        "when graphviz or matplotlib is installed)")
    parser.add_argument("--reports", nargs="+", metavar="JSON", help="probe nothing: merge every task's "
                        "`preflight --json` output into the cluster's graph, link matrix and prediction")
    parser.add_argument("--json", action="store_true", help="print the findings (and every probe) as JSON")
    parser.set_defaults(func=_preflight)


def _preflight(args: argparse.Namespace) -> int:
    for name in ("timeout", "wait", "linger"):
        value = getattr(args, name)
        if value is not None and not (0 < value if name == "timeout" else 0 <= value) or (value or 0) > 3600:
            print(f"mirrorlab preflight: --{name} {value} is outside {'(0' if name == 'timeout' else '[0'}, 3600] "
                  "seconds.", file=sys.stderr)
            return 2
    if not 0 <= args.bulk_mib <= 64 or (args.model_bytes is not None and args.model_bytes <= 0):
        print("mirrorlab preflight: --bulk-mib must be in [0, 64] and --model-bytes a positive number of bytes.",
              file=sys.stderr)
        return 2
    for name in ("collective_timeout", "job_timeout"):
        value = getattr(args, name)
        if value is not None and not 0 < value < float("inf"):
            print(f"mirrorlab preflight: --{name.replace('_', '-')} {value} is not a positive number of seconds.",
                  file=sys.stderr)
            return 2
    if args.reports:
        return _merge(args)
    text = _tf_config_text(args.tf_config)
    if text is None:
        return 2
    linger = args.wait if args.linger is None else args.linger
    report = preflight(text, timeout_s=args.timeout, wait_s=args.wait, linger_s=linger,
                       bulk_bytes=int(args.bulk_mib * (1 << 20)), model_bytes=args.model_bytes,
                       collective_timeout_s=args.collective_timeout, job_timeout_s=args.job_timeout)
    return _print(args, report.findings, report.graph(), report.json_extra())


def _merge(args: argparse.Namespace) -> int:
    texts = []
    for path in args.reports:
        try:
            with open(path, encoding="utf-8") as source:
                texts.append((path, source.read(MAX_INPUT_BYTES + 1)))
        except (OSError, UnicodeDecodeError) as err:
            print(f"mirrorlab preflight: cannot read --reports {path}: {err}.", file=sys.stderr)
            return 2
    try:
        findings, graph = merge_reports(texts, args.model_bytes)
    except ReportError as err:
        print(f"mirrorlab preflight: {err}", file=sys.stderr)
        return 2
    return _print(args, findings, graph, {})


def _print(args: argparse.Namespace, findings: list, graph: nx.DiGraph, extra: dict) -> int:
    """Prints the findings (text or JSON), writes --graph, and returns the exit status."""
    if args.graph:
        problem = write_graph(graph, args.graph)
        if problem:
            print(f"mirrorlab preflight: {problem}", file=sys.stderr)
            return 2
    if args.json:
        print(to_json(findings, **extra))
    else:
        sys.stdout.write(render_text(findings, stream=sys.stdout))
    return exit_code(findings)


def _tf_config_text(path: str | None) -> str | None:
    """TF_CONFIG from ``path`` or the environment; None (after saying why on stderr) when there is none to read."""
    if path is None:
        text = os.environ.get("TF_CONFIG")
        if text is None:
            print("mirrorlab preflight: TF_CONFIG is unset, so there are no peers to probe. Set it (or pass "
                  "--tf-config FILE) on every worker.", file=sys.stderr)
        return text
    try:
        with open(path, encoding="utf-8") as source:
            text = source.read(MAX_INPUT_BYTES + 1)
    except (OSError, UnicodeDecodeError) as err:
        print(f"mirrorlab preflight: cannot read --tf-config {path}: {err}. Pass a TF_CONFIG JSON file.",
              file=sys.stderr)
        return None
    if len(text) > MAX_INPUT_BYTES:
        print(f"mirrorlab preflight: --tf-config {path} is over {MAX_INPUT_BYTES} bytes; a TF_CONFIG is a few "
              "kilobytes.", file=sys.stderr)
        return None
    return text
