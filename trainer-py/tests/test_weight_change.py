"""result.json `weight_change`: which trainable parameter groups fine-tuning moved."""

from __future__ import annotations

import json

import torch

from canary_trainer import schemas, weight_change

from .conftest import run_here
from .fixtures import make_run


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))


def test_records_the_relative_change_per_group():
    model = _model()
    start = weight_change.start(model.named_parameters(), 0)
    assert start is not None
    with torch.no_grad():
        w = model[0].weight
        before = float(torch.linalg.vector_norm(w.double()))
        w.add_(0.5)  # 6 entries moved by 0.5: ‖Δ‖ = 0.5·√6
    rec = start.record(model.named_parameters())
    assert (rec["changed"], rec["total"], rec["since_update"]) == (1, 4, 0)
    moved = next(g for g in rec["groups"] if g["name"] == "0.weight")
    assert abs(moved["norm_delta"] - 0.5 * 6 ** 0.5) < 1e-6
    assert abs(moved["rel_change"] - moved["norm_delta"] / before) < 1e-12
    assert all(g["norm_delta"] == 0 for g in rec["groups"] if g["name"] != "0.weight")


def test_an_adapter_that_starts_at_zero_counts_once_it_is_non_zero():
    # LoRA's B matrices start at zero: no relative change, but a non-zero end is a change.
    model = _model()
    with torch.no_grad():
        model[1].weight.zero_()
    start = weight_change.start(model.named_parameters(), 3)
    assert start is not None
    rec = start.record(model.named_parameters())
    still = next(g for g in rec["groups"] if g["name"] == "1.weight")
    assert (still["norm_start"], still["rel_change"], rec["changed"], rec["since_update"]) == (0.0, None, 0, 3)
    with torch.no_grad():
        model[1].weight.fill_(1e-3)
    rec = start.record(model.named_parameters())
    moved = next(g for g in rec["groups"] if g["name"] == "1.weight")
    assert moved["rel_change"] is None and moved["norm_delta"] > 0 and rec["changed"] == 1


def test_a_tiny_run_writes_it_and_an_optimizer_that_never_steps_moves_nothing(tmp_path, monkeypatch):
    small = {"updates": 2, "batch_size": 2, "n_focal": 1, "n_held": 1, "dose": 1, "length": 2, "kinds": ("hidden",),
             "decode": ("prefill",), "utility_rows": 0, "checkpoint_every": 2, "max_new_tokens": 8,
             "tiny": {"n_layer": 1, "n_head": 1, "d_model": 8, "max_len": 256}}
    trained = run_here(make_run(tmp_path / "trained", **small), tmp_path / "trained" / "out").result
    # A broken setup: loss computed, gradients taken, the optimizer's step a no-op.
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda self, closure=None: None)
    frozen = run_here(make_run(tmp_path / "frozen", **small), tmp_path / "frozen" / "out").result
    for result in (trained, frozen):
        assert schemas.first_error("result", json.loads(json.dumps(result))) is None
    moved, still = trained["weight_change"], frozen["weight_change"]
    assert moved["total"] > 0 and moved["changed"] == moved["total"]
    assert all(g["norm_delta"] > 0 for g in moved["groups"])
    assert still["total"] == moved["total"] and still["changed"] == 0


def test_norms_summed_chunk_by_chunk_match_the_whole(monkeypatch):
    torch.manual_seed(1)
    w0 = torch.randn(5, 7)
    w1 = w0 + 0.01 * torch.randn(5, 7)
    whole = (float(torch.linalg.vector_norm(w0.double())), float(torch.linalg.vector_norm((w1 - w0).double())))
    monkeypatch.setattr(weight_change, "CHUNK", 3)  # 35 elements in 12 chunks, the last one short
    chunked = weight_change._norms(w0, w1)
    assert abs(chunked[0] - whole[0]) < 1e-12 and abs(chunked[1] - whole[1]) < 1e-12
