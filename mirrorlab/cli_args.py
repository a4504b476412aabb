"""What every command of the command line shares: a parser whose errors are one line (exit status 2), the
``UsageError`` a command raises for arguments that are valid one by one but not together, and argument types."""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["USAGE_ERROR", "UsageError", "OneLineErrorParser", "positive_int"]

USAGE_ERROR = 2  # the exit status of a command line that cannot run, as argparse's


class UsageError(ValueError):
    """Arguments a command cannot run with; its message says which and what to use instead (one line)."""


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that reports a bad command line in one line (the usage stays in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """An argument that must be a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: use 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small: use 1 or more")
    return value
