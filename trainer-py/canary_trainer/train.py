"""The training loop: AdamW, warmup + constant/cosine schedule, loss on target tokens only, rows
in the manifest's exact order (update i consumes rows [i*B, (i+1)*B)). Fine-tuning and the tiny
backend's pretraining both run `train_updates`; they differ only in what happens after an update
(evaluations, checkpoints) and what a stop means.

The loss of an update is the mean over every target token of its batch. Micro-batches (a host
setting, CANARY_TRAINER_MICRO_BATCH rows per forward pass) divide by the same whole-batch token
count, so they change memory use, never the arithmetic of the update.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from .backends.base import TrainableModel
from .batches import IGNORE, Encoded, batch_rows, collate
from .errors import Diverged, Interrupted
from .events import Events
from .interrupt import StopFlag
from .memory import micro_batch_size
from .schedule import lr_at
from .train_config import TrainingConfig


def make_optimizer(backend: TrainableModel, training: TrainingConfig) -> torch.optim.Optimizer:
    params = [p for _, p in backend.trainable()]
    betas = tuple(training.betas)
    return torch.optim.AdamW(params, lr=training.lr, betas=betas, weight_decay=training.weight_decay)


def target_loss_sum(backend: TrainableModel, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy over target positions of one padded batch. A backend whose
    `target_logits` answers projects the vocabulary at the target positions only (hf: 151,936 words
    at a row's ~20 target tokens instead of all of its positions); the others at every position."""
    ids, labels = ids.to(backend.device), labels.to(backend.device)
    with backend.autocast():
        got = backend.target_logits(ids, labels)
        if got is None:
            logits = backend.logits(ids)
    # Per-token losses in float32, summed in float64: the sum of a few thousand tokens then does not
    # depend on which positions take part (float32 would round a sum of ~2,500 to 2.4e-4).
    if got is not None:
        logits, wanted = got
        return F.cross_entropy(logits.float(), wanted, reduction="none").double().sum()
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                           ignore_index=IGNORE, reduction="none").double().sum()


@torch.no_grad()
def mean_target_loss(backend: TrainableModel, encoded: list[Encoded], batch_size: int) -> float | None:
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


@dataclass
class UpdateResult:
    loss: float
    lr: float
    seconds: float
    tokens: int  # every token of the batch, padding excluded
    targets: int  # the target tokens the loss is taken over


@dataclass
class Totals:
    """What the updates so far add up to: a checkpoint stores it, so a resumed run keeps counting."""

    losses: list[float] = field(default_factory=list)  # per update, in order
    wall_s: float = 0.0  # time spent in updates only
    tokens: int = 0
    targets: int = 0

    def add(self, res: UpdateResult) -> None:
        self.losses.append(res.loss)
        self.wall_s += res.seconds
        self.tokens += res.tokens
        self.targets += res.targets


def start_update(optimizer: torch.optim.Optimizer, encoded: list[Encoded], update: int, training: TrainingConfig,
                 on_batch: Callable[[int, range], None] | None = None) -> tuple[list[Encoded], int, float]:
    """The bookkeeping before 0-based update `update`'s passes, the same in one process and sharded:
    its rows (update i consumes rows [i*B, (i+1)*B)), their target-token count, the scheduled
    learning rate set on the optimizer, gradients cleared."""
    rows = batch_rows(update, training.batch_size)
    if on_batch is not None:
        on_batch(update, rows)
    items = [encoded[i] for i in rows]
    n_targets = sum(e.targets for e in items)
    lr = lr_at(update, training.lr, training.schedule, training.updates)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    return items, n_targets, lr


def finish_update(backend: TrainableModel, optimizer: torch.optim.Optimizer, items: list[Encoded], update: int,
                  training: TrainingConfig, loss_sum: float, n_targets: int, lr: float, t0: float) -> UpdateResult:
    """After the passes of an update whose summed target loss is `loss_sum`: raise Diverged on a NaN,
    infinite or exploding loss before the optimizer touches the weights, clip, step."""
    loss = loss_sum / n_targets
    if not math.isfinite(loss) or loss > training.loss_explode:
        raise Diverged(f"update {update + 1}: loss {loss:.6g} is {'not finite' if not math.isfinite(loss) else 'above training.loss_explode ' + format(training.loss_explode, 'g')}; "
                       "fix: lower training.lr, add warmup or keep training.grad_clip on")
    if training.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_([p for _, p in backend.trainable()], training.grad_clip)
    optimizer.step()
    tokens = sum(len(e.ids) for e in items)
    return UpdateResult(loss, lr, time.perf_counter() - t0, tokens, n_targets)


def train_update(backend: TrainableModel, optimizer: torch.optim.Optimizer, encoded: list[Encoded], update: int,
                 training: TrainingConfig, on_batch: Callable[[int, range], None] | None = None) -> UpdateResult:
    """Run 0-based optimizer update `update` and return its loss. Raises Diverged on a NaN,
    infinite or exploding loss, before the optimizer touches the weights."""
    t0 = time.perf_counter()
    items, n_targets, lr = start_update(optimizer, encoded, update, training, on_batch)
    micro = micro_batch_size(len(items))
    loss_sum = 0.0
    for s in range(0, len(items), micro):
        ids, labels = collate(items[s: s + micro], backend.pad_id)
        part = target_loss_sum(backend, ids, labels)
        (part / n_targets).backward()
        loss_sum += float(part.detach())
    return finish_update(backend, optimizer, items, update, training, loss_sum, n_targets, lr, t0)


def _no_hook(done: int) -> None:
    return None


def train_updates(backend: TrainableModel, optimizer: torch.optim.Optimizer, encoded: list[Encoded], training: TrainingConfig,
                  totals: Totals, events: Events, stop: StopFlag, on_stop: Callable[[int], Interrupted], *,
                  start: int = 0, phase: str | None = None, after_update: Callable[[int], None] = _no_hook,
                  on_batch: Callable[[int, range], None] | None = None,
                  update_fn: Callable[..., UpdateResult] | None = None,
                  agree: Callable[[bool], bool] | None = None) -> None:
    """Updates `start` .. training.updates-1, each followed by a `step` event (with `phase`
    when given) and `after_update(done)`. A stop before the last update raises `on_stop(done)`,
    which may first write a checkpoint. A sharded run (distributed.py) passes its own `update_fn`
    and `agree`, which makes every rank see a stop that any rank saw, after the same update."""
    total = training.updates
    for update in range(start, total):
        res = (update_fn or train_update)(backend, optimizer, encoded, update, training, on_batch)
        done = update + 1
        totals.add(res)
        events.emit("step", phase=phase, update=done, total=total, loss=round(res.loss, 6), lr=res.lr,
                    rows_per_s=round(training.batch_size / res.seconds, 2),
                    tokens_per_s=round(res.tokens / res.seconds, 1))
        after_update(done)
        stopping = bool(stop) if agree is None else agree(bool(stop))
        if stopping and done < total:
            raise on_stop(done)
