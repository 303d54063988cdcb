"""The run state a checkpoint carries: to_meta/from_meta round-trip exactly (through JSON, as
meta.json does), and a checkpoint written with per-phase `_scoring` keys still resumes."""

import json
from pathlib import Path
from types import SimpleNamespace

from canary_trainer.run_state import PhaseRecord, RunState
from canary_trainer.train import Totals

STAMP = {"component": "trainer", "code_sha256": "0" * 64}
MANIFEST = SimpleNamespace(sha256="a" * 64, run_id="run-x", path=Path("manifest.json"))


def _state():
    return RunState(at_start=STAMP, base_model={"kind": "random"}, base_utility_loss=2.5,
                    totals=Totals(losses=[3.0, 2.75], wall_s=0.125, tokens=40, targets=12),
                    evaluations=[PhaseRecord({"phase": "base", "update": 0, "probes": []}, ["prefix-tree"]),
                                 PhaseRecord({"phase": "update-1", "update": 1, "probes": []},
                                             ["per-candidate", "prefix-tree"])])


def test_meta_round_trips_through_json():
    state = _state()
    meta = json.loads(json.dumps(state.to_meta(MANIFEST)))
    assert meta["manifest_sha256"] == "a" * 64 and meta["run_id"] == "run-x"
    assert all("_scoring" not in e for e in meta["evaluations"])
    back = RunState.from_meta(meta)
    assert back == state
    assert back.scoring_modes() == {"prefix-tree", "per-candidate"}


def test_meta_with_per_phase_scoring_keys_still_reads():
    meta = json.loads(json.dumps(_state().to_meta(MANIFEST)))
    for entry, modes in zip(meta["evaluations"], meta.pop("evaluation_scoring")):
        entry["_scoring"] = modes
    back = RunState.from_meta(meta)
    assert back == _state()
    assert all("_scoring" not in r.entry for r in back.evaluations)
