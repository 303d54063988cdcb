"""Host settings: everything the trainer takes from its environment rather than from the manifest,
parsed here and nowhere else. They change how a run uses this machine, never what it computes
(except `threads`, which result.json records among the numerics):

  CANARY_TRAINER_THREADS                 CPU threads for torch (default: torch's own choice)
  CANARY_TRAINER_MICRO_BATCH             rows per forward pass (default: the whole batch; sharded: its share per rank)
  CANARY_TRAINER_GRADIENT_CHECKPOINTING  1: recompute activations in backward (default 0)
  CANARY_TRAINER_DEVICE_MEMORY_GB        the device's memory for the estimate (default: the GPU's own; none on CPU)
  CANARY_TRAINER_LOCK_WAIT_S             seconds to wait for another trainer's output-folder lock (default 60)
  CANARY_TRAINER_PARENT_WATCH            0: do not stop when the parent process exits (default 1)
  CANARY_TRAINER_CACHE                   the content-addressed cache folder (default ~/.cache/canary-audit)
  CANARY_SCHEMAS_DIR                     the shared JSON Schemas (default: the checkout's schemas/)
  CANARY_TRAINER_TENSORBOARD             0: no TensorBoard event files (default 1; tracking.py)
  CANARY_TRAINER_WANDB_PROJECT           W&B project of every run (the worker's --wandb; empty: W&B off;
                                         unset: the audit's tracking.json decides)
  CANARY_TRAINER_WANDB_ENTITY            W&B entity with it (default: W&B's own)
  RANK, LOCAL_RANK, WORLD_SIZE           set by torch.distributed.run for a sharded run

`host()` parses the environment into one typed `Host` at each call (cheap), so a caller that
changes the environment in-process (tests) is seen; a malformed value is a clear error naming the
variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .errors import TrainerError


@dataclass(frozen=True)
class Host:
    threads: int | None
    micro_batch: int | None
    gradient_checkpointing: bool
    device_memory_gb: float | None
    lock_wait_s: float | None
    parent_watch: bool
    cache: Path
    schemas_dir: Path | None
    rank: int
    local_rank: int
    world_size: int
    tensorboard: bool = True
    # None: unset (the audit decides); "": W&B off.
    wandb_project: str | None = None
    wandb_entity: str | None = None


def _number(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> int | float | None:
    raw = env.get(name)
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise TrainerError(f"environment variable {name}: {raw!r} is not {what}; fix: set it to {what} or unset it",
                           recoverable=False) from None


def host(env: Mapping[str, str] | None = None) -> Host:
    e = os.environ if env is None else env
    cache = e.get("CANARY_TRAINER_CACHE")
    schemas = e.get("CANARY_SCHEMAS_DIR")
    threads, micro = _number(e, "CANARY_TRAINER_THREADS", int), _number(e, "CANARY_TRAINER_MICRO_BATCH", int)
    return Host(
        threads=None if threads is None else int(threads),
        micro_batch=None if micro is None else int(micro),
        gradient_checkpointing=e.get("CANARY_TRAINER_GRADIENT_CHECKPOINTING", "") not in ("", "0"),
        device_memory_gb=_number(e, "CANARY_TRAINER_DEVICE_MEMORY_GB", float),
        lock_wait_s=_number(e, "CANARY_TRAINER_LOCK_WAIT_S", float),
        parent_watch=e.get("CANARY_TRAINER_PARENT_WATCH", "1") != "0",
        cache=Path(cache) if cache else Path.home() / ".cache" / "canary-audit",
        schemas_dir=Path(schemas) if schemas else None,
        rank=int(_number(e, "RANK", int) or 0),
        local_rank=int(_number(e, "LOCAL_RANK", int) or 0),
        world_size=int(_number(e, "WORLD_SIZE", int) or 1),
        tensorboard=e.get("CANARY_TRAINER_TENSORBOARD", "1").strip().lower() not in ("0", "false", "no", "off"),
        wandb_project=e["CANARY_TRAINER_WANDB_PROJECT"].strip() if "CANARY_TRAINER_WANDB_PROJECT" in e else None,
        wandb_entity=e.get("CANARY_TRAINER_WANDB_ENTITY") or None,
    )
