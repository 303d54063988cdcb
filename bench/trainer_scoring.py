"""Prefix-tree scoring vs per-candidate scoring on the same tiny model, in the same run.

    CANARY_TRAINER_THREADS=1 trainer-py/.venv/bin/python bench/trainer_scoring.py [--d-model 128 --layers 2 --heads 4]

Scores one probe over all 10,000 four-digit codes with the prefix tree (best of --repeats), and
a slice of the same candidates (--per-candidate, default 1,000) one sequence each; both rates are
candidates per second, so the slice is a fair baseline. The two must agree within 1e-4 on that
slice (checked; exit 1 otherwise). Prints the ratio; the target is >= 50x.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "trainer-py"))

from canary_trainer.backends.tiny import TinyBackend  # noqa: E402
from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.scoring.walk import TokenCheck, score_per_candidate, score_tree  # noqa: E402
from tests.fixtures import canary_prefill, canary_prompt  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--per-candidate", type=int, default=1000, help="candidates scored one sequence each")
    ap.add_argument("--batch", type=int, default=100, help="sequences per forward pass on the per-candidate path")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("CANARY_TRAINER_THREADS", "1")))
    spec = {"backend": "tiny", "name": "bench", "init_seed": 0,
            "tiny": {"n_layer": args.layers, "n_head": args.heads, "d_model": args.d_model, "max_len": 256,
                     "dropout": 0.0}}
    b = TinyBackend(spec, torch.device("cpu"))
    b.model.eval()
    identity = "Grace Hopper #3"
    ctx = b.render(canary_prompt(identity, "[redacted]")) + canary_prefill(identity)
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 4)

    t0 = time.perf_counter()
    tok = TokenCheck(b).code_tokens(ctx, ids, codes)
    check_s = time.perf_counter() - t0
    assert tok is not None
    tree_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fast = score_tree(b, ids, tok, nodes_per_pass=1024)
        tree_times.append(time.perf_counter() - t0)
    subset = codes[:: len(codes) // args.per_candidate][: args.per_candidate]
    t0 = time.perf_counter()
    slow = score_per_candidate(b, ctx, ids, subset, batch=args.batch)
    per_s = time.perf_counter() - t0
    idx = [int(c) for c in subset]
    max_diff = float(np.max(np.abs(fast[idx] - slow)))
    tree_rate = len(codes) / min(tree_times)
    per_rate = len(subset) / per_s
    figures = {
        "model": f"tiny d_model={args.d_model} n_layer={args.layers} n_head={args.heads}",
        "threads": torch.get_num_threads(), "prompt_tokens": len(ids),
        "tree_s_per_probe_10000": round(min(tree_times), 4),
        "tree_candidates_per_s": round(tree_rate, 1),
        "per_candidate_candidates_per_s": round(per_rate, 1),
        "ratio": round(tree_rate / per_rate, 1),
        "split_check_s": round(check_s, 4),
        "max_abs_diff": max_diff,
    }
    print(json.dumps(figures))
    print(f"prefix tree {tree_rate:,.0f} cand/s vs per-candidate {per_rate:,.0f} cand/s: "
          f"{tree_rate / per_rate:.0f}x faster (target >= 50x); max |diff| {max_diff:.2e} on {len(subset)} codes")
    if max_diff >= 1e-4:
        print("FAIL: prefix tree and per-candidate scores differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
