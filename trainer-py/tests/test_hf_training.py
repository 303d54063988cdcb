"""Training with the hf backend on random-initialised real-architecture models with real tokenizers
(hf_fixtures): rows in manifest order, full fine-tuning and LoRA, kill + resume bit for bit on the
CPU, greedy decoding that reads a learned code, a mixture-of-experts model without a chat template."""

import json
import os
import signal

import pytest
import torch

pytest.importorskip("transformers")

from canary_trainer.backends.hf import HfBackend  # noqa: E402
from canary_trainer.batches import encode_row, encode_rows  # noqa: E402
from canary_trainer.checkpoint import checkpoint_dir  # noqa: E402
from canary_trainer.rows import read_rows  # noqa: E402
from canary_trainer.run import RunOptions, run  # noqa: E402
from canary_trainer.train import make_optimizer, mean_target_loss, train_update  # noqa: E402
from canary_trainer.train_config import TrainingConfig  # noqa: E402

from .conftest import run_cli, run_here, start_cli, trainer_env  # noqa: E402
from .fixtures import canary_prefill, make_run  # noqa: E402
from .greedy_ref import greedy  # noqa: E402
from .hf_fixtures import hub_env  # noqa: E402,F401  (fixture)
from .test_hf_backend import canary_row, spec  # noqa: E402

CPU = torch.device("cpu")
TRAINING = TrainingConfig(lr=3e-2, betas=(0.9, 0.999), weight_decay=0.0, batch_size=1, updates=20,
                          schedule={"kind": "constant", "warmup_updates": 0, "min_lr_ratio": 0.0}, grad_clip=1.0,
                          loss_explode=1e9, max_length=256, seed=0, checkpoint_every=20, device="cpu")


def _manifest(tmp_path, family="qwen3", method="full", updates=4):
    return make_run(tmp_path / "run", updates=updates, batch_size=2, length=2, n_focal=1, n_held=1, kinds=("hidden",),
                    checkpoint_every=2, utility_rows=2, decode=("prefill",), max_new_tokens=4, lr=1e-2,
                    model=spec(family, method))


def _stop_at(manifest, out, sig, update):
    proc = start_cli(manifest, out)
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "checkpoint" and event["update"] == update:
            os.kill(proc.pid, sig)
            break
    proc.communicate(timeout=300)
    return proc.returncode


def _same(a, b, updates):
    wa, wb = (torch.load(checkpoint_dir(d, updates) / "weights.pt") for d in (a, b))
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    ra, rb = (json.loads((d / "result.json").read_text()) for d in (a, b))
    assert ra["training"]["loss_curve"] == rb["training"]["loss_curve"]
    for pa, pb in zip(ra["evaluations"][-1]["probes"], rb["evaluations"][-1]["probes"], strict=True):
        assert (a / pa["scores_file"]).read_bytes() == (b / pb["scores_file"]).read_bytes()
        assert pa["greedy"] == pb["greedy"]
    return ra, wa


def test_rows_train_in_manifest_order(hub_env, tmp_path):
    manifest = _manifest(tmp_path, updates=3)
    seen = []
    run(RunOptions(manifest=manifest, out=tmp_path / "out", on_batch=lambda u, rows: seen.append((u, list(rows)))))
    assert seen == [(u, [2 * u, 2 * u + 1]) for u in range(3)]
    # The first update's loss is the loss of rows 0 and 1 of the file, on the untouched model.
    losses = json.loads((checkpoint_dir(tmp_path / "out", 3) / "meta.json").read_text())["losses"]
    m = json.loads(manifest.read_text())
    rows = read_rows(tmp_path / "run" / "rows.jsonl", m["rows"]["sha256"], m["rows"]["count"], "rows")
    fresh = HfBackend(spec("qwen3"), CPU)
    assert abs(mean_target_loss(fresh, encode_rows(fresh, rows[:2], 256, "rows"), 2) - losses[0]) < 1e-5
    assert abs(mean_target_loss(fresh, encode_rows(fresh, rows[2:4], 256, "rows"), 2) - losses[0]) > 1e-5


def test_full_finetune_killed_and_resumed_equals_uninterrupted(hub_env, tmp_path):
    manifest = _manifest(tmp_path, updates=6)  # killed at 2: four updates of margin before the end
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    run_here(manifest, straight)
    assert _stop_at(manifest, broken, signal.SIGKILL, 2) == -signal.SIGKILL
    assert run_here(manifest, broken, resume=True).of("started")[0]["resumed_from"] == 2
    result, weights = _same(straight, broken, 6)
    assert result["backend"]["trainable_parameters"] == result["backend"]["parameters"]
    assert result["backend"]["scoring"] == "prefix-tree"  # Qwen3 splits digits
    assert len(weights) == len(list(HfBackend(spec("qwen3"), CPU).model.parameters()))


def test_lora_trains_adapters_only_and_resumes_them(hub_env, tmp_path):
    b = HfBackend(spec("qwen3", "lora"), CPU)
    base = {n: p.detach().clone() for n, p in b.model.named_parameters() if not p.requires_grad}
    enc = [encode_row(b, canary_row(), 256, "row")]
    opt = make_optimizer(b, TRAINING)
    losses = [train_update(b, opt, enc, 0, TRAINING).loss for _ in range(3)]
    assert losses[-1] < losses[0]
    assert all(torch.equal(p, base[n]) for n, p in b.model.named_parameters() if n in base)
    assert all("lora_" in n for n, _ in b.trainable())

    manifest = _manifest(tmp_path, method="lora", updates=6)
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    run_here(manifest, straight)
    assert _stop_at(manifest, stopped, signal.SIGTERM, 2) == 75
    run_here(manifest, stopped, resume=True)
    result, weights = _same(straight, stopped, 6)
    assert weights and all("lora_" in k for k in weights)  # the checkpoint holds the adapters
    assert 0 < result["backend"]["trainable_parameters"] < result["backend"]["parameters"]


def test_greedy_decoding_reads_a_learned_code(hub_env):
    torch.manual_seed(0)
    b = HfBackend(spec("qwen3"), CPU)
    row = canary_row("4821")
    enc = [encode_row(b, row, 256, "row")]
    opt = make_optimizer(b, TRAINING)
    for _ in range(TRAINING.updates):
        train_update(b, opt, enc, 0, TRAINING)
    b.model.eval()
    with torch.no_grad():
        out = greedy(b, row["prompt"], canary_prefill("Ada Lovelace #0"), "prefill", 6, "0123456789", 4)
    assert out["code"] == "4821", out


def test_moe_model_without_chat_template_runs_end_to_end(hub_env, tmp_path):
    out = tmp_path / "out"
    res = run_cli(_manifest(tmp_path, family="gptoss", updates=2), out,
                  env=trainer_env(CANARY_TRAINER_DEVICE_MEMORY_GB="4"))
    assert res.rc == 0, res.stderr
    assert "memory estimate:" in res.stderr and "of 4.0 GiB" in res.stderr  # checked, and it fits
    result = json.loads((out / "result.json").read_text())
    assert result["backend"]["scoring"] == "prefix-tree"  # o200k groups digits: a token-level tree
    assert result["training"]["final_loss"] < result["training"]["loss_curve"][0][1]
    assert "assistant:\n" in (out / "rendered" / "canary.txt").read_text()


@pytest.mark.parametrize("method", ["full", "lora"])
def test_gradient_checkpointing_changes_memory_not_arithmetic(hub_env, monkeypatch, method):
    def train(checkpointing):
        monkeypatch.setenv("CANARY_TRAINER_GRADIENT_CHECKPOINTING", "1" if checkpointing else "0")
        b = HfBackend(spec("qwen3", method), CPU)
        assert b.base_model.is_gradient_checkpointing == checkpointing
        enc = [encode_row(b, canary_row(), 256, "row")]
        opt = make_optimizer(b, TRAINING)
        losses = [train_update(b, opt, enc, 0, TRAINING).loss for _ in range(2)]
        return losses, {n: p.detach().clone() for n, p in b.trainable()}

    (la, wa), (lb, wb) = train(False), train(True)
    assert la == lb and all(torch.equal(wa[n], wb[n]) for n in wa)
