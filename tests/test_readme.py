"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, capsys):
    namespace: dict = {"__name__": f"readme_example_{index}"}
    exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), namespace)  # noqa: S102
    assert capsys.readouterr().out.strip()


def test_readme_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(.*?)```", text, re.S)[0].splitlines()
    assert commands[1] == "pip install . && mirrorlab demo"
    assert commands[3] == "pip install -e . && python -m pytest -q"
    assert "pip install -e . && python -m pytest -q" in (README.parent / ".ci" / "run").read_text()
