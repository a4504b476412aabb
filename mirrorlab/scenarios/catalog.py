"""Finds scenarios: the catalog shipped as ``mirrorlab.catalog`` (the repository's ``scenarios/`` folder), or a
file the user names."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .schema import Scenario, ScenarioError, load_scenario

__all__ = ["catalog_paths", "find_scenario", "load_catalog"]


def catalog_paths() -> list[Path]:
    """The catalog's scenario files, sorted by name."""
    folder = resources.files("mirrorlab.catalog")
    return sorted((Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".toml")),
                  key=lambda p: p.stem)


def find_scenario(name_or_file: str) -> Scenario:
    """A catalog name (``firewall-cut``) or a path to a ``.toml`` file, loaded and checked."""
    if name_or_file.endswith(".toml") or "/" in name_or_file:
        return load_scenario(name_or_file)
    for path in catalog_paths():
        if path.stem == name_or_file:
            return load_scenario(path)
    names = ", ".join(p.stem for p in catalog_paths())
    raise ScenarioError(f"no scenario named {name_or_file!r} in the catalog. Fix: use one of {names}, or give "
                        "the path of a .toml file.")


def load_catalog() -> list[Scenario]:
    """Every catalog scenario, loaded and checked."""
    return [load_scenario(path) for path in catalog_paths()]
