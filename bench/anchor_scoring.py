"""The token-level prefix tree vs the real lm-evaluation-harness (`lm_eval.models.huggingface.HFLM`,
its `loglikelihood` with its defaults: the logits cache on, its own batching and sorting), on the
random-init test models with real tokenizers (Qwen3: one token per digit; Llama 3: digit groups),
CPU float32, one thread, interleaved in one process. Runs from the bench-only venv:

    bash bench/setup-anchors.sh
    CANARY_TRAINER_THREADS=1 bench/.venv-anchors/bin/python bench/anchor_scoring.py [--families qwen3 llama3]
        [--block 1000] [--batches 4 8 16 32 64] [--repeats 3]

Per family: one canary probe. The tree scores all 10,000 four-digit codes: the candidates'
in-context tokenization (`trie.code_token_lists`, once per run of many probes) and the scoring
(`trie.score_trie`) are timed apart and reported alone and together. lm_eval scores the block of
codes 0000..(block-1) (complete groups of its logits cache: requests that share the context and all
but the last continuation token run once) as (context, code) requests, its own tokenization
included; its time is scaled to 10,000. Its batch size is tuned first (least CPU time per code on
the first 200 codes, among --batches). The two alternate --repeats times, which one goes first
alternating too. Each side is timed in wall seconds and in this process's CPU seconds (one thread:
on a machine shared with other jobs the CPU time is the steadier measure of the work; the wall
time also counts waiting for a core). Printed per family as one JSON line: medians, each side's
spread (min-max) and the ratio with its spread (min/max to max/min), for CPU and wall time.

Agreement: lm_eval moves the context's trailing space into the continuation, so its score is
log p(" " | context without the space) + log p(code | context): the tree's score plus one constant
per probe. Checked: max |lm_eval - tree - median offset| < 1e-4, the true code's rank and the top
10 identical (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
import torch
from _common import each_family, setup_hf, summary, timed

from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.scoring import tree as _trie  # noqa: E402
from canary_trainer.scoring.tree import code_token_lists, score_trie  # noqa: E402
from tests.fixtures import canary_prefill, canary_prompt  # noqa: E402

TRUE_CODE = "4821"


def _backend(family: str):
    from tests.test_hf_backend import backend

    return backend(family)


def lm_eval_scores(b, ctx: str, codes: list[str], batch: int) -> np.ndarray:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=b.base_model, tokenizer=b.tokenizer, batch_size=batch, device="cpu")
    reqs = [Instance(request_type="loglikelihood", doc={}, arguments=(ctx, c), idx=i) for i, c in enumerate(codes)]
    out = lm.loglikelihood(reqs, disable_tqdm=True)
    return np.array([lp for lp, _ in out], dtype=np.float64)


@torch.no_grad()
def bench_family(family: str, args) -> dict:
    b = _backend(family)
    ident = "Ada Lovelace #0"
    ctx = b.render(canary_prompt(ident, "[redacted]")) + canary_prefill(ident)
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 4)
    block = codes[: args.block]
    rates = {}
    for batch in args.batches:  # tuning on a short block (complete cache groups: 10 codes each)
        _, s, c = timed(lambda batch=batch: lm_eval_scores(b, ctx, block[:200], batch))
        rates[batch] = round(c / 200 * len(codes), 2)
    batch = min(rates, key=rates.get)
    # wall/cpu: per probe; tree = scoring with the candidates' tokenization already done (a run
    # tokenizes once for all its probes), tokenize = that tokenization (once per run).
    times: dict[str, list[float]] = {k: [] for k in ("tree_wall", "tree_cpu", "tokenize_wall", "tokenize_cpu",
                                                     "lm_eval_wall", "lm_eval_cpu")}
    tree = ref = None
    for r in range(args.repeats):
        order = ("tree", "lm_eval") if r % 2 == 0 else ("lm_eval", "tree")
        for name in order:
            if name == "tree":
                getattr(_trie, "_SPANS", {}).clear()  # no tokenization carried over (no cache is passed)
                split, s, c = timed(lambda: code_token_lists(b, ctx, ids, codes))
                times["tokenize_wall"].append(s)
                times["tokenize_cpu"].append(c)
                tree, s, c = timed(lambda split=split: score_trie(b, ids, split))
                times["tree_wall"].append(s)
                times["tree_cpu"].append(c)
            else:
                ref, s, c = timed(lambda: lm_eval_scores(b, ctx, block, batch))
                times["lm_eval_wall"].append(s * len(codes) / len(block))
                times["lm_eval_cpu"].append(c * len(codes) / len(block))
    for kind in ("wall", "cpu"):
        times[f"tree+tokenize_{kind}"] = [a + t for a, t in zip(times[f"tree_{kind}"], times[f"tokenize_{kind}"])]
    diff = ref - tree[: len(block)]
    offset = float(np.median(diff))
    sub = tree[: len(block)]
    rank = lambda v, i: int((v > v[i]).sum())  # noqa: E731
    true_i = int(TRUE_CODE) if int(TRUE_CODE) < len(block) else 0
    top = lambda v: np.argsort(-v, kind="stable")[:10].tolist()  # noqa: E731
    return {"family": family, "context_tokens": len(ids), "lm_eval_batch": batch,
            "lm_eval_tuning_cpu_s_per_probe": rates, "repeats": args.repeats,
            "cpu": summary({"tree": times["tree_cpu"], "lm_eval": times["lm_eval_cpu"]}, "tree", "lm_eval"),
            "wall": summary({"tree": times["tree_wall"], "lm_eval": times["lm_eval_wall"]}, "tree", "lm_eval"),
            "cpu_with_tokenization": summary({"tree": times["tree+tokenize_cpu"], "lm_eval": times["lm_eval_cpu"]},
                                              "tree", "lm_eval"),
            "tokenize_cpu_s": round(statistics.median(times["tokenize_cpu"]), 3),
            "lm_eval_offset": offset, "max_abs_diff_after_offset": float(np.max(np.abs(diff - offset))),
            "same_rank": rank(ref, true_i) == rank(sub, true_i), "same_top10": top(ref) == top(sub),
            "times": {k: [round(x, 3) for x in v] for k, v in times.items()}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--block", type=int, default=1000, help="codes lm_eval scores per repeat (multiple of 10)")
    ap.add_argument("--batches", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    setup_hf()
    return each_family(args.families, lambda family: bench_family(family, args),
                       lambda row: row["max_abs_diff_after_offset"] < 1e-4 and row["same_rank"] and row["same_top10"])


if __name__ == "__main__":
    sys.exit(main())
