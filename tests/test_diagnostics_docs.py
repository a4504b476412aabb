"""docs/diagnostics.md: every registered code has a catalog entry, and every TF_CONFIG example there triggers its code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mirrorlab.diagnostics import diagnose, preflight, rpc_deadline_lint, trace_analysis
from mirrorlab.diagnostics.findings import registered_codes
from mirrorlab.diagnostics.tf_config_lint import check_tf_config, check_tf_config_set

DOC = (Path(__file__).resolve().parents[1] / "docs" / "diagnostics.md").read_text()
SECTIONS = dict(re.findall(r"^### (ML-[A-Z]+-\d{3}): .*?\n(.*?)(?=^### |\Z)", DOC, re.M | re.S))
PROJECT_PREFIXES = ("ML-CFG-", "ML-ENV-", "ML-CLI-", "ML-NET-", "ML-LIVE-", "ML-TRC-")
COMMANDS = (diagnose, preflight, rpc_deadline_lint, trace_analysis)  # their imports register every code they report


def test_every_code_is_in_the_catalog_with_its_title() -> None:
    codes = [c for c in registered_codes() if c.code.startswith(PROJECT_PREFIXES)]
    assert sorted(SECTIONS) == [c.code for c in codes]
    for info in codes:
        assert f"### {info.code}: {info.title}\n" in DOC
        assert "Fix:" in SECTIONS[info.code] and "Example" in SECTIONS[info.code]


@pytest.mark.parametrize("code", sorted(c for c in SECTIONS if c.startswith("ML-CFG-")))
def test_catalog_examples_trigger_their_code(code: str) -> None:
    block = re.search(r"```(?:json)?\n(.*?)\n```", SECTIONS[code], re.S).group(1)
    if "one TF_CONFIG per worker" in SECTIONS[code]:
        items = [tuple(line.split(": ", 1)) for line in block.splitlines()]
        found = check_tf_config_set(items)
    else:
        found = check_tf_config(block)
    assert code in {f.code for f in found}
