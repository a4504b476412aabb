"""Every package folder is installed under the name the layout promises (setuptools package-dir)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, dirs = set(config["packages"]), config["package-dir"]
    found = set()
    for name, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *relative.parts]) if relative.parts else name)
    assert found == listed
    assert dirs == {"mirrorlab": "mirrorlab", "mirrorlab.sim": "sim", "mirrorlab.backend": "backend",
                    "mirrorlab.diagnostics": "diagnostics", "mirrorlab.catalog": "scenarios"}
