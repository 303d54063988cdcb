"""Experiment tracking (canary_trainer/tracking.py): TensorBoard event files read back with
TensorBoard's own reader, W&B's offline run folder, and what happens when either is missing."""

import json
import math
import sys
import types

import numpy as np
import pytest

from canary_trainer.errors import TrainerError
from canary_trainer.manifest import load_manifest
from canary_trainer.tracking import (
    TENSORBOARD_DIR,
    WANDB_PROJECT_ENV,
    TrackingConfig,
    phase_scalars,
    start_tracking,
    tracking_config,
)

from .conftest import run_here
from .fixtures import make_run

UPDATES = 4


def _audit_run(tmp_path, **kw):
    """A run folder where the controller puts it: <audit>/runs/<run_id>/manifest.json."""
    return make_run(tmp_path / "audit" / "runs" / "run-x", updates=UPDATES, batch_size=2, length=2, n_focal=1,
                    n_held=1, kinds=("hidden",), decode=("prefill",), max_new_tokens=8, utility_rows=0,
                    eval_checkpoints=[2], **kw)


def _scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_a_run_leaves_event_files_that_tensorboard_reads_back(tmp_path):
    manifest = _audit_run(tmp_path)
    out = tmp_path / "out"
    here = run_here(manifest, out)
    steps = [e for e in here.events if e["event"] == "step"]
    scalars = _scalars(out / TENSORBOARD_DIR)
    # Every update's loss, at its update, as the progress events said (float32 in the file).
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, UPDATES + 1))
    assert [v for _, v in scalars["train/loss"]] == pytest.approx([e["loss"] for e in steps], rel=1e-6)
    assert [s for s, _ in scalars["train/lr"]] == list(range(1, UPDATES + 1))
    # The evaluation phases at their updates (update-2 and final), for each arm.
    for arm in ("inserted", "held_out"):
        points = scalars[f"eval/{arm}/hidden/exposure_median"]
        assert [s for s, _ in points] == [2, UPDATES]
        assert all(0 <= v <= math.log2(100) + 1e-6 for _, v in points)
        assert [s for s, _ in scalars[f"eval/{arm}/hidden/recovered"]] == [2, UPDATES]


def test_phase_exposure_is_the_rank_of_the_true_code(tmp_path):
    manifest = load_manifest(_audit_run(tmp_path))
    code = manifest.data["canaries"][0]["code"]
    index = manifest.candidates("f000").index(code)
    scores = np.zeros(100, dtype="<f4")
    scores[index] = 1.0
    scores[[3, 7, 11]] = [2.0, 1.0, 0.5]  # one above, one tied (ties count against the secret), one below
    if index in (3, 7, 11):
        pytest.skip("the fixture's code collides with the planted scores")
    (tmp_path / "s.f32").write_bytes(scores.tobytes())
    entry = {"phase": "final", "update": 4, "probes": [
        {"canary_id": "f000", "arm": "inserted", "kind": "hidden", "scores_file": "s.f32",
         "greedy": {"prefill": {"text": code, "code": code}}}]}
    values = phase_scalars(manifest, tmp_path, entry)
    assert values["eval/inserted/hidden/exposure_median"] == pytest.approx(math.log2(100) - math.log2(3))
    assert values["eval/inserted/hidden/recovered"] == 1.0


def test_without_tensorboardx_the_run_is_untracked_with_one_warning(tmp_path, capsys):
    manifest = load_manifest(_audit_run(tmp_path))

    def importer(name):
        raise ImportError(f"No module named {name!r}")

    tracker = start_tracking(TrackingConfig(), manifest, tmp_path / "out", importer=importer)
    assert tracker.sinks == []
    err = capsys.readouterr().err
    assert err.count("tensorboardX cannot be imported") == 1 and "fix:" in err
    assert not (tmp_path / "out" / TENSORBOARD_DIR).exists()


def test_wandb_asked_for_but_missing_is_a_clear_error(tmp_path):
    manifest = load_manifest(_audit_run(tmp_path))

    def importer(name):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return __import__(name)

    cfg = TrackingConfig(wandb_project="canaries", wandb_source="grid")
    with pytest.raises(TrainerError) as caught:
        start_tracking(cfg, manifest, tmp_path / "out", importer=importer)
    assert caught.value.kind == "missing_dependency" and not caught.value.recoverable
    assert "'canaries'" in caught.value.message and "fix: pip install wandb" in caught.value.message


def test_the_project_comes_from_the_worker_then_the_audit(tmp_path):
    manifest = load_manifest(_audit_run(tmp_path))
    assert tracking_config(manifest, {}).wandb_project is None
    (tmp_path / "audit" / "tracking.json").write_text(json.dumps({"wandb": {"project": "from-grid", "entity": "lab"}}))
    cfg = tracking_config(manifest, {})
    assert (cfg.wandb_project, cfg.wandb_entity, cfg.tensorboard) == ("from-grid", "lab", True)
    assert tracking_config(manifest, {WANDB_PROJECT_ENV: "from-worker"}).wandb_project == "from-worker"
    assert tracking_config(manifest, {WANDB_PROJECT_ENV: ""}).wandb_project is None  # the worker turns it off
    assert tracking_config(manifest, {"CANARY_TRAINER_TENSORBOARD": "0"}).tensorboard is False
    (tmp_path / "audit" / "tracking.json").write_text(json.dumps({"wandb": {"project": ""}}))
    with pytest.raises(TrainerError, match=r"tracking.json: wandb.project must be a non-empty string; fix: "):
        tracking_config(manifest, {})


class _FakeWandbRun:
    def __init__(self, calls):
        self.calls = calls

    def define_metric(self, name, **kw):
        self.calls.append(("define_metric", name, kw))

    def log(self, values):
        self.calls.append(("log", values))

    def finish(self):
        self.calls.append(("finish",))


def test_one_wandb_run_per_training_run_grouped_by_audit(tmp_path, monkeypatch):
    """What the trainer hands W&B, checked on a recording stand-in (the real package is exercised by
    the offline test below where it is installed)."""
    calls: list = []
    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: calls.append(("init", kw)) or _FakeWandbRun(calls)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    manifest = _audit_run(tmp_path)
    (tmp_path / "audit" / "tracking.json").write_text(json.dumps({"wandb": {"project": "canaries"}}))
    run_here(manifest, tmp_path / "out")
    init = calls[0][1]
    m = load_manifest(manifest)
    assert (init["project"], init["group"], init["name"], init["id"]) == \
        ("canaries", "audit-aaaaaaaaaaaa", "visibility=redacted", m.run_id)
    assert init["config"]["cell"] == {"visibility": "redacted"} and init["dir"] == str(tmp_path / "out")
    logs = [c[1] for c in calls if c[0] == "log"]
    assert [v["train/update"] for v in logs if "train/loss" in v] == list(range(1, UPDATES + 1))
    assert [v["eval/update"] for v in logs if "eval/update" in v] == [2, UPDATES]
    assert calls[-1] == ("finish",)


def test_wandb_offline_run_folder(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is not installed in this venv (docs/trainer.md, Experiment tracking)")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    manifest = _audit_run(tmp_path)
    (tmp_path / "audit" / "tracking.json").write_text(json.dumps({"wandb": {"project": "canaries"}}))
    run_here(manifest, tmp_path / "out")
    runs = list((tmp_path / "out" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))


def _summary(tmp_path):
    verdict = {"comparison": "dose 4, hidden probes: inserted − held-out", "sentence": "raised | exposure",
               "estimate": 3.13, "lo": 1.31, "hi": 4.95, "n_runs": 3, "n_canaries": 2,
               "unadjusted": {"verdict": "higher"}, "adjusted": {"verdict": "higher"}}
    undecided = {**verdict, "estimate": 0.2, "lo": -1.5, "hi": 1.9, "adjusted": {"verdict": "undecided"}}
    path = tmp_path / "audit" / "report" / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"audit": {"id": "audit-aaaaaaaaaaaa", "name": "t"},
                                "verdicts": [verdict, undecided]}))
    return path


def test_the_reports_verdicts_to_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from canary_trainer.track_verdicts import track

    out = track(_summary(tmp_path), tmp_path / "audit")
    assert out == {"tensorboard": str(tmp_path / "audit" / "tensorboard" / "verdicts"), "wandb": False, "warnings": []}
    acc = EventAccumulator(out["tensorboard"])
    acc.Reload()
    scalars = {t: [(e.step, round(e.value, 4)) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    assert scalars["verdict/0/estimate_bits"] == [(3, 3.13)] and scalars["verdict/0/decision"] == [(3, 1.0)]
    assert scalars["verdict/1/lo_bits"] == [(3, -1.5)] and "verdict/1/decision" not in scalars  # undecided
    text = acc.Tensors("verdicts/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| 0 | dose 4, hidden probes: inserted − held-out | higher | raised \\| exposure |" in text


def test_verdicts_for_an_audit_that_asks_for_wandb_without_it_warn_with_the_fix(tmp_path, monkeypatch):
    from canary_trainer.track_verdicts import track

    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    summary = _summary(tmp_path)
    (tmp_path / "audit" / "tracking.json").write_text(json.dumps({"wandb": {"project": "canaries"}}))
    out = track(summary, tmp_path / "audit")
    assert out["wandb"] is False and out["tensorboard"] is not None
    assert len(out["warnings"]) == 1 and "fix: pip install wandb" in out["warnings"][0]
