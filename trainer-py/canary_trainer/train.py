"""The training loop: AdamW, warmup + constant/cosine schedule, loss on target tokens only, rows
in the manifest's exact order (update i consumes rows [i*B, (i+1)*B)).

The loss of an update is the mean over every target token of its batch. Micro-batches (a host
setting, CANARY_TRAINER_MICRO_BATCH rows per forward pass) divide by the same whole-batch token
count, so they change memory use, never the arithmetic of the update.
"""

from __future__ import annotations

import math
import os
import time
from typing import Callable

import torch
import torch.nn.functional as F

from .backends import Backend
from .batches import IGNORE, Encoded, batch_rows, collate
from .errors import Diverged
from .schedule import lr_at


def make_optimizer(backend: Backend, training: dict) -> torch.optim.Optimizer:
    params = [p for _, p in backend.trainable()]
    betas = tuple(training["betas"])
    return torch.optim.AdamW(params, lr=training["lr"], betas=betas, weight_decay=training["weight_decay"])


def micro_batch_size(batch_size: int) -> int:
    env = os.environ.get("CANARY_TRAINER_MICRO_BATCH")
    return max(1, min(batch_size, int(env))) if env else batch_size


def target_loss_sum(backend: Backend, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy over target positions of one padded batch."""
    ids, labels = ids.to(backend.device), labels.to(backend.device)
    with backend.autocast():
        logits = backend.logits(ids)
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                           ignore_index=IGNORE, reduction="sum")


@torch.no_grad()
def mean_target_loss(backend: Backend, encoded: list[Encoded], batch_size: int) -> float | None:
    """Mean target-token loss over rows (utility: held-out background rows)."""
    if not encoded:
        return None
    backend.model.eval()
    total, count = 0.0, 0
    try:
        for s in range(0, len(encoded), batch_size):
            chunk = encoded[s: s + batch_size]
            ids, labels = collate(chunk, backend.pad_id)
            total += float(target_loss_sum(backend, ids, labels))
            count += sum(e.targets for e in chunk)
    finally:
        backend.model.train()
    return total / max(count, 1)


class UpdateResult:
    def __init__(self, loss: float, lr: float, seconds: float, tokens: int, targets: int):
        self.loss, self.lr, self.seconds, self.tokens, self.targets = loss, lr, seconds, tokens, targets


def train_update(backend: Backend, optimizer: torch.optim.Optimizer, encoded: list[Encoded], update: int,
                 training: dict, on_batch: Callable[[int, range], None] | None = None) -> UpdateResult:
    """Run 0-based optimizer update `update` and return its loss. Raises Diverged on a NaN,
    infinite or exploding loss, before the optimizer touches the weights."""
    t0 = time.perf_counter()
    rows = batch_rows(update, training["batch_size"])
    if on_batch is not None:
        on_batch(update, rows)
    items = [encoded[i] for i in rows]
    n_targets = sum(e.targets for e in items)
    lr = lr_at(update, training["lr"], training["schedule"], training["updates"])
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    micro = micro_batch_size(len(items))
    loss_sum = 0.0
    for s in range(0, len(items), micro):
        ids, labels = collate(items[s: s + micro], backend.pad_id)
        part = target_loss_sum(backend, ids, labels)
        (part / n_targets).backward()
        loss_sum += float(part.detach())
    loss = loss_sum / n_targets
    if not math.isfinite(loss) or loss > training["loss_explode"]:
        raise Diverged(f"update {update + 1}: loss {loss:.6g} is {'not finite' if not math.isfinite(loss) else 'above training.loss_explode ' + format(training['loss_explode'], 'g')}; "
                       "fix: lower training.lr, add warmup or keep training.grad_clip on")
    if training["grad_clip"] > 0:
        torch.nn.utils.clip_grad_norm_([p for _, p in backend.trainable()], training["grad_clip"])
    optimizer.step()
    tokens = sum(len(e.ids) for e in items)
    return UpdateResult(loss, lr, time.perf_counter() - t0, tokens, n_targets)
