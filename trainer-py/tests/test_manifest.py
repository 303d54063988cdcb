"""Manifest validation at the edge: a bad manifest exits 2 with one clear line, before any work."""

import json

import pytest

from canary_trainer.errors import BadManifest
from canary_trainer.manifest import load_manifest

from .conftest import run_cli
from .fixtures import make_run, rewrite_manifest


def test_valid_manifest_gets_schema_defaults(tmp_path):
    path = make_run(tmp_path, updates=2, batch_size=2)
    m = load_manifest(path)
    assert m.training.grad_clip == 1.0 and m.training.betas == (0.9, 0.999)
    assert m.training.schedule["min_lr_ratio"] == 0
    assert m.model["finetune"] == {"method": "full"}
    assert m.model["tiny"]["dropout"] == 0
    assert m.eval["score_batch_size"] == 1024
    assert m.arms == {"f000": "inserted", "f001": "inserted", "h000": "held_out"}


def test_tiny_size_defaults_apply_when_absent(tmp_path):
    path = make_run(tmp_path, updates=2, batch_size=2)
    rewrite_manifest(path, lambda d: d["model"].pop("tiny"))
    m = load_manifest(path)
    assert m.model["tiny"] == {"n_layer": 2, "n_head": 4, "d_model": 128, "max_len": 256, "dropout": 0}


def test_schema_violation_exits_2_with_one_line(tmp_path):
    path = make_run(tmp_path, updates=2, batch_size=2)
    rewrite_manifest(path, lambda d: d["training"].update(batch_size=0))
    res = run_cli(path, tmp_path / "out")
    assert res.rc == 2
    assert [e["event"] for e in res.events] == ["error"]
    err = res.events[0]
    assert err["kind"] == "bad_manifest" and err["recoverable"] is False
    assert "\n" not in err["message"]
    assert "training.batch_size" in err["message"] and "0" in err["message"]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out" / "checkpoints").exists()


@pytest.mark.parametrize("edit, field, words", [
    (lambda d: d["rows"].update(count=99), "rows.count", "batch_size*updates"),
    (lambda d: d["eval"].update(checkpoints=[50]), "eval.checkpoints[0]", "after the last update"),
    (lambda d: d["canaries"][0].update(code="12a4"), "canaries[0].code", "not 4 characters"),
    (lambda d: d["probes"][0].update(canary_id="nobody"), "probes[0].canary_id", "names no canary"),
    (lambda d: d["rows"].update(path="../elsewhere.jsonl"), "rows.path", "leaves the manifest's folder"),
    (lambda d: d["model"]["tiny"].update(n_head=3), "model.tiny.n_head", "not divisible"),
    (lambda d: d["model"].update(finetune={"method": "lora", "r": 4}), "model.finetune.method", "hf backend"),
    (lambda d: d["candidate_space"].update(size=99), "candidate_space.size", "alphabet^length"),
])
def test_cross_field_rules_name_the_field(tmp_path, edit, field, words):
    path = rewrite_manifest(make_run(tmp_path, updates=2, batch_size=2), edit)
    with pytest.raises(BadManifest) as info:
        load_manifest(path)
    message = str(info.value)
    assert f"field {field}:" in message and words in message and "fix:" in message
    assert "\n" not in message


def test_sampled_space_needs_candidates_with_the_true_code(tmp_path):
    space = {"kind": "sampled", "alphabet": "0123456789", "length": 4, "size": 3, "decoys": 2, "seed": 0}
    path = make_run(tmp_path, updates=2, batch_size=2, space=space)

    def add_candidates(d):
        for c in d["canaries"] + d["held_out"]:
            c["candidates"] = [c["code"], "0000" if c["code"] != "0000" else "1111", "9999" if c["code"] != "9999" else "8888"]
    rewrite_manifest(path, add_candidates)
    m = load_manifest(path)
    assert m.candidates("f000")[0] == m.canary("f000")["code"]
    rewrite_manifest(path, lambda d: d["canaries"][0].update(candidates=["0001", "0002", "0003"]))
    with pytest.raises(BadManifest, match=r"canaries\[0\].candidates"):
        load_manifest(path)


def test_designs_together_each_canary_scored_over_its_own_design_candidates(tmp_path):
    """canaries.designs: together: one sampled space over the designs' joined alphabet, each
    canary tagged with its design and listing candidates from its own design's space only."""
    space = {"kind": "sampled", "alphabet": "!#0123456789", "length": 4, "size": 3, "decoys": 2, "seed": 0}
    path = make_run(tmp_path, updates=2, batch_size=2, space=space)

    def together(d):
        f000, f001 = d["canaries"][0], d["canaries"][1]
        f000.update(design="codes", candidates=[f000["code"], *[c for c in ("0000", "1111", "2222") if c != f000["code"]][:2]])
        f001.update(design="rare-tokens", code="!#!#", candidates=["!#!#", "####", "!!!!"])
        h = d["held_out"][0]
        h.update(design="codes", candidates=[h["code"], *[c for c in ("0000", "1111", "2222") if c != h["code"]][:2]])

    rewrite_manifest(path, together)
    m = load_manifest(path)
    assert m.canary("f001")["design"] == "rare-tokens"
    assert m.candidates("f001") == ["!#!#", "####", "!!!!"]
    assert all(ch.isdigit() for c in m.candidates("f000") for ch in c)
    rewrite_manifest(path, lambda d: d["canaries"][1].update(design=""))
    with pytest.raises(BadManifest, match="design"):
        load_manifest(path)


def test_invalid_json_names_line_and_column(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text('{\n  "run_id": oops\n}')
    with pytest.raises(BadManifest, match=r"manifest.json:2:\d+: not valid JSON"):
        load_manifest(path)


def test_missing_manifest_file(tmp_path):
    res = run_cli(tmp_path / "absent.json", tmp_path / "out")
    assert res.rc == 2 and res.events[-1]["kind"] == "bad_manifest"
    assert "cannot read the manifest" in res.events[-1]["message"]


def test_bad_command_line_emits_an_error_event(tmp_path):
    import subprocess

    from .conftest import PYTHON, trainer_env

    proc = subprocess.run([PYTHON, "-m", "canary_trainer", "run", "--out", str(tmp_path)], capture_output=True,
                          text=True, env=trainer_env())
    assert proc.returncode == 2
    event = json.loads(proc.stdout.strip())
    assert event["event"] == "error" and "--manifest" in event["message"]


def test_probe_longer_than_the_context_fails_before_training(tmp_path):
    path = make_run(tmp_path, updates=2, batch_size=2)
    rewrite_manifest(path, lambda d: d["probes"][1].update(prefill="x" * 250))
    res = run_cli(path, tmp_path / "out")
    assert res.rc == 2 and not res.of("step")
    assert "field probes[1].prompt" in res.of("error")[-1]["message"]
    assert "context of 256 tokens" in res.of("error")[-1]["message"]


def test_pretrain_gets_its_defaults_and_its_rules(tmp_path):
    path = make_run(tmp_path / "a", updates=2, batch_size=2, pretrain={"updates": 3, "batch_size": 2, "lr": 0.01})
    pre = load_manifest(path).pretrain
    assert pre["schedule"] == {"kind": "cosine", "warmup_updates": 20, "min_lr_ratio": 0.1} and pre["seed"] == 0
    rewrite_manifest(path, lambda d: d["model"]["tiny"]["pretrain"].update(schedule={"kind": "constant"}))
    assert load_manifest(path).pretrain["schedule"] == {"kind": "constant", "warmup_updates": 20, "min_lr_ratio": 0.1}
    assert load_manifest(make_run(tmp_path / "b", updates=2, batch_size=2)).pretrain is None

    rewrite_manifest(path, lambda d: d["model"]["tiny"]["pretrain"].update(updates=4))
    with pytest.raises(BadManifest, match=r"field model.tiny.pretrain.rows.count: 6 rows but batch_size\*updates = 2\*4"):
        load_manifest(path)
    rewrite_manifest(path, lambda d: d["model"]["tiny"]["pretrain"].update(updates=3) or
                     d["model"]["tiny"]["pretrain"]["rows"].update(path="../elsewhere.jsonl"))
    with pytest.raises(BadManifest, match="model.tiny.pretrain.rows.path"):
        load_manifest(path)


def test_odd_head_dimension_is_rejected_for_rotary_positions(tmp_path):
    path = make_run(tmp_path, updates=2, batch_size=2, tiny={"n_layer": 1, "n_head": 2, "d_model": 30, "max_len": 256})
    with pytest.raises(BadManifest, match="field model.tiny.n_head: head dimension d_model/n_head = 15 is odd"):
        load_manifest(path)
