"""The differential fuzzer's random cases (fuzz_datasets/fuzz_collectives/fuzz_checkpoints/fuzz_variables/
fuzz_checkpoint_api) run on mirrorlab without TensorFlow: every generated spec is JSON, builds a case whose result
normalizes, replays to the same result, and shrinks to specs of its own area. (The comparison with TF is
fuzz_against_tf.py, by hand, and the live test.)"""

from __future__ import annotations

import json
import random

import pytest

from .adapters import MirrorlabApi
from .cases import Case
from .fuzz_checkpoints import clean
from .fuzz_datasets import text_files
from .fuzz_against_tf import AREAS

API = MirrorlabApi()
text_files()


def _result(spec: dict, setup: str) -> dict:
    """mirrorlab's normalized result of ``spec`` in ``setup`` (checkpoint specs name their own strategies)."""
    strategy = None if spec["area"] == "checkpoint" else API.strategy_for(setup)
    return clean(API.run_case(Case("fuzz", AREAS[spec["area"]].build(spec)), strategy))


@pytest.mark.parametrize("area", sorted(AREAS))
def test_generated_specs_run_and_replay_on_mirrorlab(area: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seeded sample of each area: JSON round trip, a normalized JSON result, the same result from the replayed
    spec, and shrinking that stays in the area and changes the spec."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    module = AREAS[area]
    for i in range(12):
        spec = module.generate(random.Random(f"test:{area}:{i}"))
        replayed = json.loads(json.dumps(spec))
        assert replayed == spec
        for setup in ("A", "B"):
            result = _result(spec, setup)  # normalizing raises TypeError on a value it cannot represent
            assert result and json.loads(json.dumps(result)) == result
            assert _result(replayed, setup) == result
        for smaller in module.shrink(spec):
            assert smaller["area"] == area and smaller != spec
