"""mirrorlab's command line (also ``python -m mirrorlab``): a demo on a simulated cluster, and your own
MultiWorkerMirroredStrategy program run on one."""

from __future__ import annotations

import os
import sys

from mirrorlab.backend import launch
from mirrorlab.diagnostics import cli as diagnostics_cli
from mirrorlab.diagnostics import preflight_cli, trace_cli

from . import demo, run_script
from ._version import __version__
from .cli_args import USAGE_ERROR, OneLineErrorParser, UsageError
from .scenarios import command as scenario_command

__all__ = ["main"]

CLOSED_PIPE = 141  # the status a shell reports for a process ended by SIGPIPE (``mirrorlab demo | head -1``)


def _parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="mirrorlab", description=__doc__.replace("``", ""))
    parser.add_argument("--version", action="version", version=f"mirrorlab {__version__}")
    parser.set_defaults(takes_passthrough=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo.register(commands)
    run_script.register(commands)
    diagnostics_cli.register(commands)
    preflight_cli.register(commands)
    trace_cli.register(commands)
    scenario_command.register(commands)
    launch.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the exit status (2 for a bad command line). Arguments
    after ``--`` are the command's ``args.passthrough`` (``mirrorlab run train.py -- --epochs 3``)."""
    argv = sys.argv[1:] if argv is None else argv
    own, passthrough = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = _parser()
    args = parser.parse_args(own)
    if passthrough and not args.takes_passthrough:
        parser.error(f"{args.command} takes no arguments after --")
    args.passthrough = passthrough
    try:
        status = args.func(args)
        sys.stdout.flush()  # a reader that went away (``| head -1``) shows here, not at interpreter exit
    except UsageError as exc:
        print(f"mirrorlab {args.command}: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return CLOSED_PIPE
    return status


if __name__ == "__main__":
    sys.exit(main())
