"""Runs over several ranks (manifest `training.gpus: N`, `parallel: fsdp`), started by the worker
as `python -m torch.distributed.run --standalone --nproc-per-node N -m canary_trainer run ...`.

- **Sharding**: FSDP2 (`torch.distributed.fsdp.fully_shard`) on every decoder layer and on the
  whole model: parameters, gradients and AdamW state live 1/N on each rank. On GPUs the layers
  compute in the manifest's dtype (bf16) from float32 master shards and reduce gradients in
  float32 (`MixedPrecisionPolicy`); on CPU (gloo, the tests) everything is float32. Activation
  checkpointing is the trainer's usual switch, CANARY_TRAINER_GRADIENT_CHECKPOINTING=1.
- **Rows**: update i consumes rows [i*B, (i+1)*B) exactly as in one process. The update's rows are
  cut into micro-batches in order (CANARY_TRAINER_MICRO_BATCH, default ceil(B/N)) and micro-batch k
  goes to rank k mod N; a rank with fewer micro-batches runs empty passes so every rank takes part
  in each collective. Each micro-batch's summed loss is divided by the whole batch's target tokens
  (times N, because FSDP averages gradients over ranks), so the update is the single-process
  update up to the order of floating-point sums.
- **Checkpoints**: `torch.distributed.checkpoint` (one shard file per rank, plus each rank's RNG
  state) written into `checkpoints/.tmp-update-NNNNNN/` and renamed to `update-NNNNNN/` by rank 0
  after every rank finished (a folder that exists is complete), with the run state's meta.json;
  resumed with the same number of ranks only.
- **Evaluation**: every phase gathers the full weights to rank 0 (`get_model_state_dict`,
  full_state_dict + cpu_offload) into one unsharded copy of the model in the compute dtype, which
  rank 0 scores and decodes with the usual code; scores and result.json are written once, by rank
  0. The other ranks wait.
- **Progress**: rank 0 only; the other ranks' events go nowhere. A stop request (SIGTERM, which
  the launcher forwards to every rank) is agreed by all ranks after each update, so they all stop
  after the same update and checkpoint together.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import math
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from .backends.base import Backend
from .batches import IGNORE, Encoded, collate
from .bounded import MAX_CHECKPOINT_FILE_BYTES, open_bounded, read_text_bounded
from .errors import BadManifest
from .host import host
from .memory import micro_size
from .train import UpdateResult, finish_update, start_update
from .train_config import TrainingConfig

# Rank 0 may evaluate for a long time while the others wait in a collective.
TIMEOUT = _dt.timedelta(hours=12)


@dataclass
class Dist:
    rank: int
    world: int
    local_rank: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        import torch.distributed as td

        td.barrier()

    def any(self, flag: bool) -> bool:
        """True on every rank when any rank says True (a stop request seen by one rank)."""
        import torch.distributed as td

        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        td.all_reduce(t, op=td.ReduceOp.MAX)
        return bool(t.item() > 0)

    def sum(self, value: float) -> float:
        import torch.distributed as td

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        td.all_reduce(t)
        return float(t.item())

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        import torch.distributed as td

        box = [obj]
        td.broadcast_object_list(box, src=0)
        return box[0]


def ranks_of(training: TrainingConfig) -> int:
    return training.gpus


def start(training: TrainingConfig, device_kind: str) -> Dist | None:
    """Join the run's process group when the manifest asks for several ranks (None: one process).
    The manifest's rank count and the launcher's must agree."""
    want = ranks_of(training)
    world = host().world_size
    if want <= 1:
        if world > 1:
            raise BadManifest(f"this trainer was started as {world} ranks but the manifest has no training.gpus; "
                              "fix: start it as one process (python -m canary_trainer run ...)")
        return None
    if world != want:
        raise BadManifest(f"training.gpus is {want}, but this trainer was started as {world} rank(s); fix: start it with "
                          f"python -m torch.distributed.run --standalone --nproc-per-node {want} -m canary_trainer run ... "
                          "(canary-audit worker does)")
    import torch.distributed as td

    rank, local = host().rank, host().local_rank
    if device_kind == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        td.init_process_group("nccl", timeout=TIMEOUT, device_id=device)
    else:
        device = torch.device("cpu")
        td.init_process_group("gloo", timeout=TIMEOUT)
    return Dist(rank, world, local, device)


def stop() -> None:
    import torch.distributed as td

    if td.is_initialized():
        td.destroy_process_group()


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks FSDP shards one by one: the longest ModuleList named `layers` (or `h`)."""
    best: list[torch.nn.Module] = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and name.rsplit(".", 1)[-1] in ("layers", "h") and len(module) > len(best):
            best = list(module)
    if not best:
        raise BadManifest(f"{type(model).__name__} has no decoder layer list (`layers`) for FSDP to shard; "
                          "fix: run this model without training.gpus")
    return best


def shard(backend: Backend, dist: Dist) -> None:
    """FSDP2 over the backend's model, in place: each decoder layer, then the root (embeddings,
    final norm, output layer)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = backend.model
    kw = {}
    if dist.device.type == "cuda" and backend.compute_dtype != torch.float32:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=backend.compute_dtype, reduce_dtype=torch.float32)
    for layer in decoder_layers(model):
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    # The target-only projection calls the decoder without the root's forward: not under FSDP.
    backend.project_every_position()


def update(backend: Backend, optimizer: torch.optim.Optimizer, encoded: list[Encoded], update_index: int,
           training: TrainingConfig, dist: Dist, loss_sum_fn: Callable[[Backend, torch.Tensor, torch.Tensor], torch.Tensor],
           on_batch: Callable[[int, range], None] | None = None) -> UpdateResult:
    """One optimizer update of a sharded run (see the module docstring); returns train.UpdateResult.
    The bookkeeping around the passes is the single-process update's (train.start_update,
    train.finish_update); only the passes and the loss's sum over ranks are this module's."""
    t0 = time.perf_counter()
    items, n_targets, lr = start_update(optimizer, encoded, update_index, training, on_batch if dist.main else None)
    micro = micro_size(len(items), dist.world)
    chunks = [items[s: s + micro] for s in range(0, len(items), micro)]
    mine = chunks[dist.rank::dist.world]
    passes = math.ceil(len(chunks) / dist.world)
    local = 0.0
    for k in range(passes):
        if k < len(mine):
            ids, labels = collate(mine[k], backend.pad_id)
        else:  # no rows left for this rank: an empty pass keeps the collectives in step
            ids = torch.full((1, 2), backend.pad_id, dtype=torch.long)
            labels = torch.full((1, 2), IGNORE, dtype=torch.long)
        part = loss_sum_fn(backend, ids, labels)
        (part * (dist.world / n_targets)).backward()
        local += float(part.detach())
    return finish_update(backend, optimizer, items, update_index, training, dist.sum(local), n_targets, lr, t0)


# ---- checkpoints --------------------------------------------------------------------------------

def save(out: Path, update_index: int, backend: Backend, optimizer: torch.optim.Optimizer, rng: dict, meta: dict, dist: Dist, keep: int) -> Path:
    """Checkpoint `update_index` of a sharded run; every rank calls it."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from .checkpoint import checkpoint_dir, list_updates

    target = checkpoint_dir(out, update_index)
    tmp = target.parent / f".tmp-{target.name}"
    if dist.main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    model_sd, optim_sd = get_state_dict(backend.model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(tmp / "dcp"))
    buf = io.BytesIO()
    torch.save(rng, buf)
    (tmp / f"rng-{dist.rank}.pt").write_bytes(buf.getvalue())
    dist.barrier()
    if dist.main:
        (tmp / "meta.json").write_text(json.dumps({**meta, "update": update_index, "ranks": dist.world}, indent=1) + "\n")
        _fsync_tree(tmp)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
        for old in list_updates(out)[:-keep]:
            shutil.rmtree(checkpoint_dir(out, old), ignore_errors=True)
    dist.barrier()
    return target


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    for path in [*sorted(p for p in root.rglob("*") if p.is_dir()), root]:
        _fsync_dir(path)


@dataclass
class SavedShards:
    update: int
    path: Path
    meta: dict


def newest(out: Path, manifest_sha256: str, dist: Dist) -> SavedShards | None:
    """The newest complete checkpoint of this manifest written by as many ranks, as rank 0 sees it."""
    from .checkpoint import checkpoint_dir, list_updates

    found = None
    if dist.main:
        for update_index in reversed(list_updates(out)):
            path = checkpoint_dir(out, update_index)
            try:
                meta = json.loads(read_text_bounded(path / "meta.json"))
            except (OSError, ValueError):
                continue
            if not isinstance(meta, dict) or meta.get("manifest_sha256") != manifest_sha256 \
                    or meta.get("ranks") != dist.world:
                continue
            if not _regular_files(path / "dcp", ".metadata"):
                continue
            found = (update_index, str(path), meta)
            break
    found = dist.broadcast(found)
    return SavedShards(found[0], Path(found[1]), found[2]) if found else None


def load(saved: SavedShards, backend: Backend, optimizer: torch.optim.Optimizer, dist: Dist) -> dict:
    """Weights and optimizer state from a sharded checkpoint into this rank's shards; its RNG state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(backend.model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(saved.path / "dcp"))
    set_state_dict(backend.model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    with open_bounded(saved.path / f"rng-{dist.rank}.pt", MAX_CHECKPOINT_FILE_BYTES) as stream:
        return torch.load(stream, map_location="cpu", weights_only=False)


def _regular_files(folder: Path, required: str) -> bool:
    """Whether `folder` holds `required` and only regular files of at most the checkpoint bound, by
    lstat (no link followed). torch.distributed.checkpoint opens the shard files itself, by name: this
    check before its open is what the trainer's read bound (bounded.py) can do for it."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    names = set()
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CHECKPOINT_FILE_BYTES:
            return False
        names.add(entry.name)
    return required in names


# ---- evaluation ---------------------------------------------------------------------------------

def gather_into(backend: Backend, eval_backend: Backend | None, dist: Dist) -> None:
    """The trained weights, gathered whole, into rank 0's unsharded evaluation copy (every rank calls)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(backend.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if dist.main and eval_backend is not None:
        target = eval_backend.model
        dtype = next(target.parameters()).dtype
        with torch.no_grad():
            missing, unexpected = target.load_state_dict({k: v.to(dtype) for k, v in full.items()}, strict=False)
        if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:
            raise RuntimeError(f"gathered weights do not match the evaluation copy: missing {missing[:3]}, unexpected {unexpected[:3]}")
    del full
