"""Utility generation: with utility.metrics beyond loss, every utility row's prompt is decoded greedily
by the base and the final model into utility/base.jsonl and utility/final.jsonl (batched, equal to
one row at a time, deterministic, shared per audit like the base evaluation, kept across a resume);
a manifest without metrics writes exactly what it wrote before."""

import hashlib
import json
import random
import signal

import pytest
import torch

from canary_trainer import checkpoint, exit_codes
from canary_trainer.backends.tiny import TinyBackend
from canary_trainer.checkpoint import checkpoint_dir, list_updates
from canary_trainer.utility import decode_rows

from .conftest import run_cli, run_here, trainer_env
from .fixtures import background_row, make_run, rewrite_manifest
from .greedy_ref import greedy_ids
from .hf_fixtures import hub_env  # noqa: F401  (fixture)
from .test_resume import _stop_at_checkpoint

CPU = torch.device("cpu")
UPDATES = 12
TINY = {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 256, "dropout": 0.0}


def _manifest(folder, metrics=("loss", "accuracy"), max_new_tokens=24, **kw):
    opts = dict(updates=UPDATES, batch_size=4, length=2, n_focal=1, n_held=1, kinds=("hidden",), utility_rows=6,
                lr=1e-2, checkpoint_every=4, tiny=TINY)
    path = make_run(folder, **{**opts, **kw})
    if metrics is not None:
        def edit(d):
            d["utility"]["metrics"] = list(metrics)
            d["utility"]["max_new_tokens"] = max_new_tokens
        rewrite_manifest(path, edit)
    return path


def _run(manifest, out, cache, *args):
    """A run in this process (`--resume` as the one argument it takes), its log lines in .stderr."""
    res = run_here(manifest, out, resume="--resume" in args, CANARY_TRAINER_CACHE=str(cache))
    return res, json.loads((out / "result.json").read_text())


def _lines(out, ref):
    raw = (out / ref["path"]).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == ref["sha256"]
    lines = [json.loads(x) for x in raw.decode().splitlines()]
    assert len(lines) == ref["count"]
    return lines


def _rows(folder):
    return [json.loads(x) for x in (folder / "utility.jsonl").read_text().splitlines()]


def _one_at_a_time(backend, rows, limit):
    backend.model.eval()
    with torch.no_grad():
        return [backend.decode(greedy_ids(backend, backend.tokenize(backend.render(r["prompt"])), limit)) for r in rows]


def test_outputs_are_written_and_equal_one_at_a_time_greedy(tmp_path):
    manifest = _manifest(tmp_path / "run")
    out = tmp_path / "out"
    _, result = _run(manifest, out, tmp_path / "cache")
    u = result["utility"]
    assert u["base_outputs"]["path"] == "utility/base.jsonl" and u["final_outputs"]["path"] == "utility/final.jsonl"
    assert u["base_loss"] > 0 and u["final_loss"] > 0
    rows = _rows(tmp_path / "run")
    base, final = _lines(out, u["base_outputs"]), _lines(out, u["final_outputs"])
    assert [x["i"] for x in base] == [x["i"] for x in final] == [r["i"] for r in rows]
    assert all("<|end|>" not in x["text"] for x in base + final)
    assert any(x["text"] for x in final)  # the trained model writes something

    spec = json.loads(manifest.read_text())["model"]
    fresh = TinyBackend(spec, CPU)  # no pretraining: the base is model.init_seed's initialisation
    assert [x["text"] for x in base] == _one_at_a_time(fresh, rows, 24)
    weights = torch.load(checkpoint_dir(out, UPDATES) / "weights.pt")
    with torch.no_grad():
        for name, p in fresh.trainable():
            p.copy_(weights[name])
    assert [x["text"] for x in final] == _one_at_a_time(fresh, rows, 24)


def test_batched_decode_equals_one_at_a_time_across_groups():
    """Rows of equal and unequal prompt lengths (tiny batches equal lengths together), limits that
    bind and a limit past the context."""
    b = TinyBackend({"backend": "tiny", "name": "t", "init_seed": 5, "tiny": TINY}, CPU)
    rng = random.Random(3)
    rows = [background_row(rng, i) for i in range(8)]
    rows += [{**rows[0], "i": 8}, {**rows[1], "i": 9}]  # same lengths as rows 0 and 1: decoded in one batch
    for limit in (1, 9, 40, 1000):
        assert decode_rows(b, rows, limit) == _one_at_a_time(b, rows, limit)


def test_deterministic_and_base_replies_shared_per_audit(tmp_path):
    cache = tmp_path / "cache"
    manifest = _manifest(tmp_path / "run")
    res_a, a = _run(manifest, tmp_path / "a", cache)
    assert "utility: base replies of 6 rows from the shared cache" not in res_a.stderr
    res_b, b = _run(manifest, tmp_path / "b", cache)
    assert "utility: base replies of 6 rows from the shared cache" in res_b.stderr
    _, c = _run(manifest, tmp_path / "c", tmp_path / "other-cache")
    for r in (b, c):
        assert r["utility"] == a["utility"]
    for name in ("base.jsonl", "final.jsonl"):
        assert (tmp_path / "a" / "utility" / name).read_bytes() == (tmp_path / "c" / "utility" / name).read_bytes()

    # another utility file (more rows) or another generation limit never reuses them
    for other in (_manifest(tmp_path / "run2", utility_rows=7), _manifest(tmp_path / "run3", max_new_tokens=5)):
        res, _ = _run(other, tmp_path / f"out-{other.parent.name}", cache)
        assert "from the shared cache" not in res.stderr.split("utility:", 1)[1].splitlines()[0]


@pytest.mark.parametrize("metrics", [None, ("loss",)])
def test_loss_only_manifest_writes_what_it_wrote_before(tmp_path, metrics):
    manifest = _manifest(tmp_path / "run", metrics=metrics, updates=2)
    _, result = _run(manifest, tmp_path / "out", tmp_path / "cache")
    assert set(result["utility"]) == {"rows", "base_loss", "final_loss"}
    assert not (tmp_path / "out" / "utility").exists()


def test_generation_metric_without_limit_is_a_bad_manifest(tmp_path):
    manifest = _manifest(tmp_path / "run", updates=2)
    rewrite_manifest(manifest, lambda d: d["utility"].pop("max_new_tokens"))
    res = run_cli(manifest, tmp_path / "out")
    assert res.rc == exit_codes.BAD_INPUT
    assert "utility" in res.of("error")[0]["message"] and "max_new_tokens" in res.of("error")[0]["message"]


def test_killed_after_the_base_phase_and_resumed_gives_the_same_outputs(tmp_path):
    manifest = _manifest(tmp_path / "run", base_model=True)
    straight = tmp_path / "straight"
    _, a = _run(manifest, straight, tmp_path / "cache-a")

    broken = tmp_path / "broken"
    rc, _ = _stop_at_checkpoint(manifest, broken, signal.SIGKILL, 4)
    assert rc == -signal.SIGKILL and max(list_updates(broken)) < UPDATES
    # an empty cache: the base replies can only come from the checkpoint
    res, b = _run(manifest, broken, tmp_path / "cache-b", "--resume")
    assert res.of("started")[0]["resumed_from"] is not None
    assert res.stderr.count("utility: decoded") == 1 and "from the shared cache" not in res.stderr
    assert b["utility"] == a["utility"]
    for name in ("base.jsonl", "final.jsonl"):
        assert (straight / "utility" / name).read_bytes() == (broken / "utility" / name).read_bytes()


def test_checkpoint_without_base_replies_is_a_final_error_naming_the_fix(tmp_path):
    """A checkpoint of this manifest that lacks the base model's utility replies (written by a trainer
    that did not keep them) cannot resume: the run fails for good (the queue must not retry it) with
    the checkpoint's update and the folder to remove, and following that fix lets the next attempt
    start from scratch."""
    manifest = _manifest(tmp_path / "run")
    out, cache = tmp_path / "out", tmp_path / "cache"
    _run(manifest, out, cache)
    newest = max(list_updates(out))
    saved = checkpoint.load_newest(out, json.loads((out / "result.json").read_text())["manifest_sha256"])
    assert saved is not None and "base_utility_texts" in saved.meta
    meta = {k: v for k, v in saved.meta.items() if k not in ("base_utility_texts", "update")}
    checkpoint.save(out, newest, saved.weights, saved.optimizer, saved.rng, meta)
    (out / "result.json").unlink()

    res = run_cli(manifest, out, "--resume", env=trainer_env(CANARY_TRAINER_CACHE=str(cache)))
    [error] = res.of("error")
    assert res.rc == exit_codes.FAILURE, res.stderr
    assert error["recoverable"] is False, error
    assert error["message"] == (f"checkpoint {newest} lacks the base model's utility replies this manifest asks for; "
                                f"fix: remove {out / 'checkpoints'} so the next attempt starts from scratch")

    checkpoint.clear(out)
    _, result = _run(manifest, out, cache, "--resume")
    assert result["training"]["resumed_from"] is None and result["utility"]["base_outputs"] is not None


def test_hf_batched_utility_decode_equals_one_at_a_time(hub_env):
    pytest.importorskip("transformers")
    from .test_hf_backend import backend

    b = backend("qwen3")
    rng = random.Random(5)
    rows = [background_row(rng, i) for i in range(4)]
    b.mem_bytes = 1 << 26  # several batches
    try:
        assert decode_rows(b, rows, 6) == _one_at_a_time(b, rows, 6)
    finally:
        b.mem_bytes = None
