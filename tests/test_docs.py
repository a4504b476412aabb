"""The guides in docs/: their Python examples run as written, their lines are wrapped, and every repository path
they or the README name (``mirrorlab/nn_kernels.py``, ``tests/conformance/``) exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
EXAMPLES = [(page, block) for page in PAGES
            for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)]
# A backticked path with a folder: `mirrorlab/summation.py`, `tests/conformance/`, `docs/`.
PATH = re.compile(r"`((?:\.ci|backend|benchmarks|diagnostics|docs|mirrorlab|sim|tests)/[\w./-]*)`")


def test_the_five_guides_exist() -> None:
    assert {page.name for page in PAGES} >= {"strategy.md", "data.md", "keras.md", "checkpoints.md",
                                             "conformance.md"}


@pytest.mark.parametrize(("page", "block"), EXAMPLES, ids=[f"{p.name}-{i}" for i, (p, _) in enumerate(EXAMPLES)])
def test_example_runs(page: Path, block: str, capsys: pytest.CaptureFixture) -> None:
    exec(compile(block, f"{page.name}[python block]", "exec"), {"__name__": f"docs_{page.stem}"})  # noqa: S102
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_lines_are_wrapped(page: Path) -> None:
    """Prose lines stay under 120 characters (tables and fenced blocks of program output are left as they are)."""
    long, fenced = [], False
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fenced ^= line.startswith("```")
        if len(line) > 120 and not line.startswith("|") and not fenced:
            long.append(n)
    assert long == [], f"{page.name}: lines over 120 characters: {long}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=["README.md", *(p.name for p in PAGES)])
def test_named_paths_exist(page: Path) -> None:
    named = PATH.findall(page.read_text(encoding="utf-8"))
    assert [path for path in named if not (ROOT / path).exists()] == []
