"""``mirrorlab diagnose``: static checks of TF_CONFIGs and environments, printed for people or as JSON.

Exit status: 0 no error (warnings allowed), 1 a check failed, 2 the configuration itself is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys

from mirrorlab.diagnostics.diagnose import diagnose_files, diagnose_host
from mirrorlab.diagnostics.findings import exit_code, render_text, to_json
from mirrorlab.diagnostics.fingerprint import collect_fingerprint

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    """Adds the ``diagnose`` subcommand to the ``mirrorlab`` parser's ``commands``."""
    parser = commands.add_parser(
        "diagnose", help="check TF_CONFIGs and environments without any network (exit 0 pass, 1 fail, 2 invalid)",
        description=__doc__)
    parser.add_argument("paths", nargs="*", metavar="FILE",
                        help="TF_CONFIG or fingerprint files, or directories of them (default: this host and its "
                             "TF_CONFIG)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--write-fingerprint", metavar="FILE",
                        help="also write this host's environment fingerprint to FILE (compare several later)")
    parser.set_defaults(func=_diagnose)


def _diagnose(args: argparse.Namespace) -> int:
    fingerprint = collect_fingerprint() if args.write_fingerprint or not args.paths else None
    if args.write_fingerprint:
        try:
            with open(args.write_fingerprint, "w", encoding="utf-8") as out:
                json.dump(fingerprint, out, indent=2)
        except OSError as err:
            print(f"mirrorlab diagnose: cannot write the fingerprint to {args.write_fingerprint}: {err.strerror}. "
                  "Pass a writable path to --write-fingerprint.", file=sys.stderr)
            return 2
    findings = diagnose_files(args.paths) if args.paths else diagnose_host(fingerprint)
    if args.json:
        extra = {"fingerprint": fingerprint} if not args.paths else {}
        print(to_json(findings, **extra))
    else:
        sys.stdout.write(render_text(findings, stream=sys.stdout))
    return exit_code(findings)
