"""The ``mirrorlab`` command line (also ``python -m mirrorlab``)."""

from __future__ import annotations

import argparse
import sys

from mirrorlab.backend import launch

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    print(run_demo(workers=args.workers, devices_per_worker=args.devices, steps=args.steps, seed=args.seed))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="mirrorlab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train a small model on a simulated 2-worker x 2-device cluster")
    demo.add_argument("--workers", type=int, default=2, help="simulated workers (default 2)")
    demo.add_argument("--devices", type=int, default=2, help="devices per worker (default 2)")
    demo.add_argument("--steps", type=int, default=8, help="training steps (default 8)")
    demo.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    demo.set_defaults(func=_demo)
    launch.register(commands)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
