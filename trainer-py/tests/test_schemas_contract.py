"""Every event and result the trainer writes satisfies the shared JSON Schemas; a full CLI run."""

import hashlib
import json

import numpy as np

from canary_trainer import schemas
from canary_trainer.manifest import exhaustive_codes

from .conftest import run_cli, run_here
from .fixtures import make_run


def test_full_run_writes_valid_events_result_and_scores(tmp_path):
    manifest = make_run(tmp_path / "run", updates=6, batch_size=2, length=3, base_model=True, eval_checkpoints=[3],
                        checkpoint_every=2)
    out = tmp_path / "run" / "output"
    res = run_cli(manifest, out)
    assert res.rc == 0, res.stderr
    # stdout is nothing but events, each valid
    assert res.stdout.count("\n") == len(res.events)
    for event in res.events:
        assert schemas.first_error("progress", event) is None, event
    kinds = [e["event"] for e in res.events]
    assert kinds[0] == "started" and kinds[-1] == "done"
    assert [e["update"] for e in res.of("step")] == list(range(1, 7))
    assert [e["update"] for e in res.of("checkpoint")] == [2, 4, 6]

    result = json.loads((out / "result.json").read_text())
    assert schemas.first_error("result", result) is None
    assert result["manifest_sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert [e["phase"] for e in result["evaluations"]] == ["base", "update-3", "final"]
    assert result["backend"]["scoring"] == "prefix-tree"
    assert result["backend"]["base_model"] == {"kind": "random"}  # no model.tiny.pretrain
    assert result["training"]["rows"] == 12 and len(result["training"]["loss_curve"]) == 6
    assert result["utility"]["base_loss"] > 0 and result["utility"]["final_loss"] > 0
    data = json.loads(manifest.read_text())
    arms = {c["id"]: "inserted" for c in data["canaries"]} | {c["id"]: "held_out" for c in data["held_out"]}
    for ev in result["evaluations"]:
        assert len(ev["probes"]) == len(data["probes"])
        for p in ev["probes"]:
            raw = (out / p["scores_file"]).read_bytes()
            assert hashlib.sha256(raw).hexdigest() == p["scores_sha256"]
            scores = np.frombuffer(raw, dtype="<f4")
            assert scores.shape == (1000,) and p["n_candidates"] == 1000
            assert np.all(scores < 0) and np.all(np.isfinite(scores))
            assert p["arm"] == arms[p["canary_id"]]
            assert set(p["greedy"]) == {"prefill", "free"}
    # probabilities over the whole candidate space sum to at most 1
    scores = np.frombuffer((out / result["evaluations"][-1]["probes"][0]["scores_file"]).read_bytes(), dtype="<f4")
    assert np.exp(scores.astype(np.float64)).sum() <= 1.0 + 1e-4
    canary = (out / "rendered" / "canary.txt").read_text()
    assert canary.startswith("<|user|>") and "<|assistant|>" in canary and canary.endswith("<|end|>")
    assert "[redacted]" in canary
    assert (out / "rendered" / "background.txt").read_text().startswith("<|user|>")
    assert result["provenance"]["changed_mid_run"] is False


def test_finished_run_short_circuits_and_force_reruns(tmp_path):
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2, length=2, n_focal=1, n_held=0, kinds=("hidden",))
    out = tmp_path / "out"
    run_here(manifest, out)
    before = (out / "result.json").read_text()
    again = run_cli(manifest, out, "--resume")
    assert again.rc == 0
    assert [e["event"] for e in again.events] == ["done"]
    assert (out / "result.json").read_text() == before
    forced = run_cli(manifest, out, "--force")
    assert forced.rc == 0 and forced.of("step")


def test_exhaustive_candidate_order_is_the_code_as_a_number():
    codes = exhaustive_codes("0123456789", 4)
    assert len(codes) == 10000
    assert all(int(c) == i for i, c in enumerate(codes))
    assert exhaustive_codes("ab", 2) == ["aa", "ab", "ba", "bb"]
