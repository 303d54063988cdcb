"""Training projects the vocabulary only at target positions (hf: the decoder's hidden states are
gathered where the loss is, then the output embedding): the same loss as the full-vocabulary
cross-entropy over every position, the same rows in the same order, the same updates; a model whose
head does more than the output embedding keeps the full projection."""

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")

from canary_trainer.backends.hf import HfBackend  # noqa: E402
from canary_trainer.batches import IGNORE, collate, encode_row  # noqa: E402
from canary_trainer.train import make_optimizer, target_loss_sum, train_update  # noqa: E402
from canary_trainer.train_config import TrainingConfig  # noqa: E402

from .fixtures import background_row, canary_prompt, canary_target  # noqa: E402
from .hf_fixtures import hub_env  # noqa: E402,F401  (fixture)
from .test_hf_backend import spec  # noqa: E402

CPU = torch.device("cpu")
TRAINING = TrainingConfig(lr=1e-2, betas=(0.9, 0.999), weight_decay=0.0, batch_size=3, updates=3,
                          schedule={"kind": "constant", "warmup_updates": 0, "min_lr_ratio": 0.0}, grad_clip=1.0,
                          loss_explode=1e9, max_length=256, seed=0, checkpoint_every=3, device="cpu")


def _rows(b, n=9):
    import random

    rng = random.Random(1)
    out = []
    for i in range(n):  # canary and background rows: prompts and targets of different lengths
        row = background_row(rng, i) if i % 3 else {"prompt": canary_prompt(f"P{i} #{i}", "[redacted]"),
                                                    "target": canary_target(f"P{i} #{i}", f"{1000 + i}")}
        out.append(encode_row(b, row, 512, f"row {i}"))
    return out


def _full_loss_sum(b, ids, labels):
    logits = b.logits(ids)
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                           ignore_index=IGNORE, reduction="none").double().sum()


@pytest.mark.parametrize("family", ["qwen3", "llama3", "gptoss", "gemma3"])
def test_target_only_loss_equals_the_full_vocabulary_loss(hub_env, family):
    b = HfBackend(spec(family), CPU)
    b.model.eval()
    enc = _rows(b)
    ids, labels = collate(enc, b.pad_id)
    with torch.no_grad():
        got, full = float(target_loss_sum(b, ids, labels)), float(_full_loss_sum(b, ids, labels))
    n = sum(e.targets for e in enc)
    assert abs(got / n - full / n) < 1e-6
    if family in ("qwen3", "llama3"):
        assert b._gather_ok  # these heads are the output embedding alone: projected at targets only
        logits, wanted = b.target_logits(ids, labels)
        assert logits.shape == (n, b.base_model.config.vocab_size) and wanted.tolist() == [
            x for row in labels[:, 1:].tolist() for x in row if x != IGNORE]


def test_updates_and_row_order_equal_the_full_projection(hub_env):
    """Two copies of one model, one projecting at targets only, one at every position (the check
    forced off): same rows per update in the same order, losses within 1e-6, weights within 1e-5."""
    runs = []
    for gather in (True, False):
        b = HfBackend(spec("qwen3"), CPU)
        b._gather_ok = None if gather else False
        enc = _rows(b)
        opt = make_optimizer(b, TRAINING)
        seen, losses = [], []
        for u in range(TRAINING.updates):
            res = train_update(b, opt, enc, u, TRAINING, on_batch=lambda u, rows, seen=seen: seen.append(list(rows)))
            losses.append(res.loss)
        assert b._gather_ok is gather
        runs.append((seen, losses, {n: p.detach().clone() for n, p in b.model.named_parameters()}))
    (seen_a, loss_a, w_a), (seen_b, loss_b, w_b) = runs
    assert seen_a == seen_b == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert max(abs(x - y) for x, y in zip(loss_a, loss_b)) < 1e-6
    assert max(float((w_a[k] - w_b[k]).abs().max()) for k in w_a) < 1e-5


def test_a_head_that_scales_its_logits_keeps_the_full_projection(hub_env):
    b = HfBackend(spec("qwen3"), CPU)
    forward = b.base_model.forward

    def scaled(*a, **k):  # a causal-LM head doing more than the output embedding (logit scaling)
        out = forward(*a, **k)
        out.logits = out.logits * 0.5
        return out

    b.base_model.forward = scaled
    enc = _rows(b, 3)
    ids, labels = collate(enc, b.pad_id)
    assert b.target_logits(ids, labels) is None and b._gather_ok is False
    with torch.no_grad():
        assert abs(float(target_loss_sum(b, ids, labels)) - float(_full_loss_sum(b, ids, labels))) < 1e-6
