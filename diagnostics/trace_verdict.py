"""Plain words for trace findings: lists of workers, and the culprit of a split chosen by majority.

When workers split into sides (different collectives, or entered versus never entered), the side with more workers
is presumed right and the others are suspect; equal largest sides are a tie, reported as such and never blamed on
whichever worker happens to come first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Verdict", "majority", "workers_text"]


def workers_text(workers: Iterable[int], noun: str = "worker") -> str:
    """``worker 1`` or ``workers 0, 2, 3``."""
    items = sorted(workers)
    return f"{noun}{'s' if len(items) != 1 else ''} {', '.join(map(str, items))}"


@dataclass(frozen=True)
class Verdict:
    """``suspects``: the workers outside the unique largest side (empty on a tie); ``sides`` as given."""

    sides: tuple[tuple[int, ...], ...]
    suspects: tuple[int, ...]

    @property
    def tie(self) -> bool:
        return not self.suspects

    def sentence(self, noun: str = "worker") -> str:
        """One sentence naming the suspects against the majority, or saying there is a tie."""
        total = sum(len(s) for s in self.sides)
        if self.tie:
            big = [s for s in self.sides if len(s) == len(self.sides[0])]
            return (f"No majority: {' against '.join(workers_text(s, noun) for s in big)} "
                    f"({len(big[0])} each of {total}); the trace cannot tell which side is wrong.")
        majority_side = self.sides[0]
        return (f"Majority rule: {workers_text(self.suspects, noun)} ({len(self.suspects)} of {total}) "
                f"{'differs' if len(self.suspects) == 1 else 'differ'} from {workers_text(majority_side, noun)} "
                f"and {'is' if len(self.suspects) == 1 else 'are'} the likely culprit.")


def majority(sides: Sequence[Iterable[int]]) -> Verdict:
    """The verdict over ``sides`` (disjoint groups of workers); sides are ordered largest first."""
    ordered = tuple(sorted((tuple(sorted(s)) for s in sides if s), key=lambda s: (-len(s), s)))
    if len(ordered) < 2 or len(ordered[0]) == len(ordered[1]):
        return Verdict(ordered, ())
    return Verdict(ordered, tuple(sorted(w for s in ordered[1:] for w in s)))
