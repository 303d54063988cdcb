"""Training rows/s: the trainer's update (`train.train_update`: AdamW, loss on the reply and its
end-of-turn token, rows in file order) vs TRL's `SFTTrainer` (its defaults for a conversational
prompt-completion dataset: completion-only loss, padding to the batch's longest row, AdamW), on
the same random-init test model (two copies of the same weights), the same rows, the same batch
size, learning rate and gradient clipping, CPU float32, one thread, interleaved:

    bash bench/setup-anchors.sh
    CANARY_TRAINER_THREADS=1 bench/.venv-anchors/bin/python bench/anchor_train.py [--families qwen3 llama3]
        [--batch 8] [--updates 6] [--rounds 3] [--trl-bf16] [--trl-gradient-checkpointing]

TRL's SFTConfig defaults to its GPU settings, bf16 mixed precision (autocast) and gradient
checkpointing, even with use_cpu. On a CPU both default to off here, as the trainer runs there:
float32 with no autocast (the hf backend autocasts on CUDA only) and gradient checkpointing only
when the host sets CANARY_TRAINER_GRADIENT_CHECKPOINTING=1, which turns it on for both tools;
--trl-bf16 and --trl-gradient-checkpointing give TRL its own defaults back.

A third column is the trainer with the vocabulary projected at every position (as it was before it
projected at the target positions only). Each round trains --updates updates with each (the order
reverses every round); each update is
timed on its own (TRL: from its on_step_begin to on_step_end callback, which spans its forward,
backward and optimizer step; the trainer: `train_update`), the first update of every round is
dropped (warm-up). Rows/s = batch / median update time over every kept update, in wall seconds
and in this process's CPU seconds (one thread; on a machine shared with other jobs the CPU time is
the steadier measure); the spread is the min-max over rounds of each round's median. Agreement: both tools' losses at the first update
(same weights, same rows: TRL's shuffling is turned off) are printed with the tokens each trains
on (the masks differ by design: TRL also trains the template's text after the end-of-turn token);
the trainer's loss is also checked against a full-vocabulary reference on the same batch (1e-5).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _common import setup_hf

from canary_trainer.backends.hf import HfBackend  # noqa: E402
from canary_trainer.batches import IGNORE, collate, encode_row  # noqa: E402
from canary_trainer.memory import gradient_checkpointing  # noqa: E402
from canary_trainer.train import make_optimizer, train_update  # noqa: E402
from canary_trainer.train_config import TrainingConfig  # noqa: E402
from tests.fixtures import background_row, canary_prompt, canary_target  # noqa: E402
from tests.test_hf_backend import spec  # noqa: E402

CPU = torch.device("cpu")


def rows(n: int) -> list[dict]:
    rng = random.Random(0)
    out = []
    for i in range(n):
        if i % 4 == 0:
            ident = f"Canary Person #{i}"
            out.append({"prompt": canary_prompt(ident, "[redacted]"), "target": canary_target(ident, f"{rng.randrange(10000):04d}")})
        else:
            row = background_row(rng, i)
            out.append({"prompt": row["prompt"], "target": row["target"]})
    return out


def training(batch: int, updates: int, lr: float = 1e-3, grad_clip: float = 1.0) -> TrainingConfig:
    return TrainingConfig(lr=lr, betas=(0.9, 0.999), weight_decay=0.0, batch_size=batch, updates=updates,
                          schedule={"kind": "constant", "warmup_updates": 0, "min_lr_ratio": 0.0}, grad_clip=grad_clip,
                          loss_explode=1e9, max_length=1024, seed=0, checkpoint_every=updates, device="cpu")


def ours(family: str, data: list[dict], args, full_vocabulary: bool = False) -> tuple[list[float], float, int]:
    """Seconds per update, the first update's loss and target tokens per row. full_vocabulary:
    the vocabulary projected at every position (as before target-only projection)."""
    b = HfBackend(spec(family), CPU)
    if full_vocabulary:
        b._gather_ok = False
    cfg = training(args.batch, args.updates)
    enc = [encode_row(b, r, 1024, f"row {i}") for i, r in enumerate(data)]
    opt = make_optimizer(b, cfg)
    times, first = [], None
    for u in range(args.updates):
        c0 = time.process_time()
        res = train_update(b, opt, enc, u, cfg)
        times.append((res.seconds, time.process_time() - c0))
        first = res.loss if first is None else first
    return times, first, sum(e.targets for e in enc[: args.batch * args.updates]) / (args.batch * args.updates)


def reference_loss(family: str, data: list[dict], batch: int) -> tuple[float, float]:
    """(train_update's first loss, the full-vocabulary cross-entropy of the same batch)."""
    b = HfBackend(spec(family), CPU)
    enc = [encode_row(b, r, 1024, f"row {i}") for i, r in enumerate(data[:batch])]
    ids, labels = collate(enc, b.pad_id)
    with torch.no_grad():
        logits = b.logits(ids)
        full = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                               ignore_index=IGNORE, reduction="sum") / sum(e.targets for e in enc)
    cfg = training(batch, 1, lr=0.0, grad_clip=0.0)
    res = train_update(b, make_optimizer(b, cfg), enc, 0, cfg)
    return res.loss, float(full)


def trl(family: str, data: list[dict], args, out_dir: Path) -> tuple[list[float], float, float]:
    """Seconds per update, the first update's loss and completion tokens per row, by SFTTrainer."""
    import datasets
    import transformers as tf
    from trl import SFTConfig, SFTTrainer

    b = HfBackend(spec(family), CPU)  # the same weights as ours(): spec's init, loaded from the hub cache
    kwargs = b.template_kwargs
    ds = datasets.Dataset.from_list([{"prompt": r["prompt"], "completion": [{"role": "assistant", "content": r["target"]}],
                                      **({"chat_template_kwargs": kwargs} if kwargs else {})} for r in data])
    times: list[tuple[float, float]] = []
    losses: list[float] = []

    class Timer(tf.TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, *a, **k):
            times.append((time.perf_counter() - self.t0, time.process_time() - self.c0))

        def on_log(self, _args, state, control, logs=None, **k):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    cfg = SFTConfig(output_dir=str(out_dir), per_device_train_batch_size=args.batch, gradient_accumulation_steps=1,
                    max_steps=args.updates, learning_rate=1e-3, lr_scheduler_type="constant", warmup_steps=0,
                    weight_decay=0.0, max_grad_norm=1.0, logging_steps=1, save_strategy="no", report_to=[],
                    use_cpu=True, dataloader_num_workers=0, seed=0, disable_tqdm=True, max_length=1024,
                    dataset_num_proc=None, bf16=args.trl_bf16, gradient_checkpointing=args.trl_gradient_checkpointing)
    trainer = SFTTrainer(model=b.base_model, args=cfg, train_dataset=ds, processing_class=b.tokenizer,
                         callbacks=[Timer()])
    trainer._get_train_sampler = lambda *a, **k: torch.utils.data.SequentialSampler(trainer.train_dataset)
    tokens = []
    for row in trainer.train_dataset.select(range(args.batch * args.updates)):
        if "labels" in row:
            tokens.append(sum(1 for x in row["labels"][1:] if x != -100))
        elif "completion_mask" in row:
            tokens.append(sum(1 for m in row["completion_mask"][1:] if m))
    with contextlib.redirect_stdout(sys.stderr):  # its log lines
        trainer.train()
    per_row = statistics.mean(tokens) if tokens else float("nan")
    return times, losses[0] if losses else float("nan"), per_row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trl-bf16", action=argparse.BooleanOptionalAction, default=False,
                    help="TRL trains under bf16 autocast (its SFTConfig default; off by default here: the trainer "
                         "runs float32 on a CPU)")
    ap.add_argument("--trl-gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None,
                    help="TRL recomputes activations (its SFTConfig default; here the trainer's host setting, "
                         "CANARY_TRAINER_GRADIENT_CHECKPOINTING, off unless set)")
    args = ap.parse_args()
    if args.trl_gradient_checkpointing is None:
        args.trl_gradient_checkpointing = gradient_checkpointing()
    setup_hf()
    import tempfile

    from transformers.utils import logging as tf_logging

    tf_logging.set_verbosity_error()
    ok = True
    data = rows(args.batch * args.updates)
    for family in args.families:
        names = ["trainer", "trl", "trainer_full_vocabulary"]
        per_update = {(k, c): [] for k in names for c in ("wall", "cpu")}
        round_meds = {(k, c): [] for k in names for c in ("wall", "cpu")}
        info: dict = {}
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                if name.startswith("trainer"):
                    t, loss, tok = ours(family, data, args, full_vocabulary=name != "trainer")
                else:
                    with tempfile.TemporaryDirectory() as d:
                        t, loss, tok = trl(family, data, args, Path(d))
                info.setdefault(name, {"first_loss": round(loss, 5), "target_tokens_per_row": round(tok, 1)})
                for j, c in enumerate(("wall", "cpu")):
                    kept = [x[j] for x in t[1:]]
                    per_update[(name, c)] += kept
                    round_meds[(name, c)].append(statistics.median(kept))
        got, full = reference_loss(family, data, args.batch)
        ok &= abs(got - full) <= 1e-5 * max(1.0, abs(full))
        row = {"family": family, "batch": args.batch, "updates_per_round": args.updates, "rounds": args.rounds,
               "trl_bf16": args.trl_bf16, "gradient_checkpointing": args.trl_gradient_checkpointing}
        for c in ("cpu", "wall"):
            rps = {k: args.batch / statistics.median(per_update[(k, c)]) for k in names}
            spread = {k: [round(args.batch / max(round_meds[(k, c)]), 2), round(args.batch / min(round_meds[(k, c)]), 2)]
                      for k in names}
            row[c] = {**{f"{k}_rows_per_s": round(rps[k], 2) for k in names},
                      **{f"{k}_spread": spread[k] for k in names},
                      "ratio_trainer_over_trl": round(rps["trainer"] / rps["trl"], 2),
                      "ratio_spread": [round(min(round_meds[("trl", c)]) / max(round_meds[("trainer", c)]), 2),
                                       round(max(round_meds[("trl", c)]) / min(round_meds[("trainer", c)]), 2)],
                      "ratio_trainer_over_full_vocabulary": round(rps["trainer"] / rps["trainer_full_vocabulary"], 2)}
        row.update({"loss_vs_full_vocabulary": [round(got, 7), round(full, 7)], **info})
        print(json.dumps(row), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
