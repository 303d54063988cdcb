"""Where a run's training lives, chosen once at its start: `Single` (one process; checkpoints by
checkpoint.py) or `Sharded` (FSDP2 over `training.gpus` ranks; distributed.py). Both answer the
same protocol, so the run loop (run.py) never asks which one it has: in one process `barrier` and
`gather` do nothing, `agree` returns its argument and `main` is always true, as the distributed
helpers of lm-evaluation-harness's `LM` are no-ops in one process.

What differs between the two: how the model is prepared (sharded in place, plus rank 0's unsharded
copy for evaluation), how an update's passes run, how a checkpoint is written, found and restored,
and how the trained weights reach the model that scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, cast

import torch

from . import checkpoint, distributed
from .backends.base import Backend
from .batches import Encoded
from .errors import TrainerError
from .events import log
from .train import UpdateResult, target_loss_sum, train_update
from .train_config import TrainingConfig

OnBatch = Callable[[int, range], None] | None


class Resumable(Protocol):
    """A checkpoint found at the start: the update it holds and the run state's meta.json."""

    update: int
    meta: dict


@dataclass
class Opened:
    """The checkpoint a run resumes from (None: a fresh start), the checkpoints skipped at this
    start ({update, reason}) and over the whole run (carried in each later checkpoint)."""

    saved: Resumable | None
    skipped_now: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


class Placement(Protocol):
    device: torch.device
    # Every trainable weight is whole in this process (False: each rank holds a shard of each).
    whole_weights: bool

    @property
    def main(self) -> bool:
        """This process writes what is written once (scores, result.json) and evaluates."""
        ...

    def barrier(self) -> None: ...

    def agree(self, flag: bool) -> bool:
        """True on every process when any says True (a stop request seen by one rank)."""
        ...

    def models(self, load: Callable[[], Backend]) -> tuple[Backend, Backend]:
        """(the model that trains, the model that scores), from `load` (a fresh backend each call)."""
        ...

    def open(self, resume: bool, clear: Callable[[], None]) -> Opened:
        """The newest usable checkpoint when resuming; otherwise `clear` the folder (once)."""
        ...

    def restore(self, saved: Resumable, backend: Backend, optimizer: torch.optim.Optimizer) -> None:
        """Weights, optimizer state and RNG state from `saved`."""
        ...

    def update(self, backend: Backend, optimizer: torch.optim.Optimizer, encoded: list[Encoded], update: int,
               training: TrainingConfig, on_batch: OnBatch = None) -> UpdateResult: ...

    def save(self, update: int, backend: Backend, optimizer: torch.optim.Optimizer, meta: dict) -> Path:
        """Checkpoint `update` (every process calls it)."""
        ...

    def gather(self, backend: Backend, scorer: Backend) -> None:
        """The trained weights into the model that scores (every process calls it)."""
        ...

    def close(self) -> None: ...


class Single:
    """One process: the model trains and scores in place; checkpoints are checkpoint.py's."""

    main = True
    whole_weights = True

    def __init__(self, out: Path, manifest_sha256: str, device: torch.device):
        self.out, self.manifest_sha256, self.device = out, manifest_sha256, device
        self.skipped: list[dict] = []

    def barrier(self) -> None:
        return None

    def agree(self, flag: bool) -> bool:
        return flag

    def models(self, load: Callable[[], Backend]) -> tuple[Backend, Backend]:
        backend = load()
        return backend, backend

    def open(self, resume: bool, clear: Callable[[], None]) -> Opened:
        skipped_now: list[dict] = []
        saved = checkpoint.load_newest(self.out, self.manifest_sha256, skipped_now) if resume else None
        for s in skipped_now:
            log(f"warning: checkpoint update {s['update']} not resumed from: {s['reason']}; "
                + (f"falling back to update {saved.update}" if saved else "starting from scratch"))
        self.skipped = (saved.meta.get("checkpoints_skipped", []) if saved else []) + skipped_now
        if saved is None:
            clear()
        return Opened(saved, skipped_now, self.skipped)

    def restore(self, saved: Resumable, backend: Backend, optimizer: torch.optim.Optimizer) -> None:
        got = cast(checkpoint.Saved, saved)
        own = dict(backend.trainable())
        missing = set(own) - set(got.weights)
        if missing:
            raise TrainerError(f"checkpoint {got.update} lacks weights {sorted(missing)[:3]} of this model; "
                               f"fix: remove {self.out / 'checkpoints'} so the next attempt starts from scratch",
                               recoverable=False)
        with torch.no_grad():
            for name, p in own.items():
                p.copy_(got.weights[name].to(p.device, p.dtype))
        optimizer.load_state_dict(got.optimizer)
        checkpoint.set_rng_state(got.rng)

    def update(self, backend: Backend, optimizer: torch.optim.Optimizer, encoded: list[Encoded], update: int,
               training: TrainingConfig, on_batch: OnBatch = None) -> UpdateResult:
        return train_update(backend, optimizer, encoded, update, training, on_batch)

    def save(self, update: int, backend: Backend, optimizer: torch.optim.Optimizer, meta: dict) -> Path:
        weights = {n: p.detach().cpu().clone() for n, p in backend.trainable()}
        return checkpoint.save(self.out, update, weights, optimizer.state_dict(), checkpoint.rng_state(),
                               {**meta, "checkpoints_skipped": self.skipped})

    def gather(self, backend: Backend, scorer: Backend) -> None:
        return None

    def close(self) -> None:
        return None


class Sharded:
    """FSDP2 over the run's ranks (distributed.py): every rank trains its shard; rank 0 scores on
    an unsharded copy the trained weights are gathered into before each evaluation phase."""

    whole_weights = False

    def __init__(self, out: Path, manifest_sha256: str, dist: distributed.Dist):
        self.out, self.manifest_sha256, self.dist, self.device = out, manifest_sha256, dist, dist.device

    @property
    def main(self) -> bool:
        return self.dist.main

    def barrier(self) -> None:
        self.dist.barrier()

    def agree(self, flag: bool) -> bool:
        return self.dist.any(flag)

    def models(self, load: Callable[[], Backend]) -> tuple[Backend, Backend]:
        backend = load()
        scorer = load() if self.dist.main else backend
        if self.dist.main and self.device.type == "cuda":
            scorer.model.to(scorer.compute_dtype)
        distributed.shard(backend, self.dist)
        return backend, scorer

    def open(self, resume: bool, clear: Callable[[], None]) -> Opened:
        shards = distributed.newest(self.out, self.manifest_sha256, self.dist) if resume else None
        skipped = shards.meta.get("checkpoints_skipped", []) if shards else []
        if shards is None and self.dist.main:
            clear()
        self.dist.barrier()
        return Opened(shards, [], skipped)

    def restore(self, saved: Resumable, backend: Backend, optimizer: torch.optim.Optimizer) -> None:
        rng = distributed.load(cast(distributed.SavedShards, saved), backend, optimizer, self.dist)
        checkpoint.set_rng_state(rng)

    def update(self, backend: Backend, optimizer: torch.optim.Optimizer, encoded: list[Encoded], update: int,
               training: TrainingConfig, on_batch: OnBatch = None) -> UpdateResult:
        return distributed.update(backend, optimizer, encoded, update, training, self.dist,
                                  target_loss_sum, on_batch)

    def save(self, update: int, backend: Backend, optimizer: torch.optim.Optimizer, meta: dict) -> Path:
        return distributed.save(self.out, update, backend, optimizer, checkpoint.rng_state(), meta, self.dist,
                                checkpoint.KEEP)

    def gather(self, backend: Backend, scorer: Backend) -> None:
        distributed.gather_into(backend, scorer if self.dist.main else None, self.dist)

    def close(self) -> None:
        distributed.stop()


def place(training: TrainingConfig, device: torch.device, out: Path, manifest_sha256: str) -> Placement:
    """Join the run's process group when the manifest asks for several ranks (distributed.start
    checks the launcher agrees), else one process on `device`."""
    dist = distributed.start(training, device.type)
    return Single(out, manifest_sha256, device) if dist is None else Sharded(out, manifest_sha256, dist)
