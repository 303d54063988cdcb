"""The training settings of a run, typed: the manifest's `training` object (schemas/manifest.schema.json,
defaults applied when the manifest is loaded) as a frozen dataclass, made once in `Manifest` and
read as attributes by the training loop (train.py), the placement and the memory estimate. The
tiny base's pretraining uses the same type with its own rate, schedule, batch and length
(`dataclasses.replace`). tests/test_train_config.py holds the fields to the schema's properties."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, Mapping

from .manifest_types import Schedule


@dataclass(frozen=True)
class TrainingConfig:
    lr: float  # peak learning rate
    schedule: Schedule  # warmup, then constant or cosine decay (schedule.py)
    batch_size: int  # rows per optimizer update
    updates: int  # optimizer updates; update i consumes rows [i*B, (i+1)*B)
    max_length: int  # tokens per row at most
    seed: int  # torch's seed after the base is in place (dropout, LoRA init)
    weight_decay: float  # AdamW's
    betas: tuple[float, ...]  # AdamW's (beta1, beta2)
    grad_clip: float  # global gradient-norm clip; 0: off
    checkpoint_every: int  # updates between checkpoints
    loss_explode: float  # a loss above this stops the run as diverged
    device: Literal["auto", "cpu", "cuda"]
    gpus: int = 1  # ranks of a sharded run (distributed.py); 1: one process
    parallel: Literal["fsdp"] | None = None

    @classmethod
    def from_manifest(cls, training: Mapping[str, Any]) -> TrainingConfig:
        """From the validated manifest's `training` object (every property the schema has)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in training.items() if k in known}
        values["betas"] = tuple(values["betas"])
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        """The manifest's form (betas a list; gpus and parallel only when set)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["betas"] = list(self.betas)
        if self.parallel is None:
            del out["parallel"]
        return out
