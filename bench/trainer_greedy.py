"""Greedy decoding before/after: one probe and mode at a time to a fixed limit with a host read per
token (before) vs batched across probes with early stop (after), interleaved, on CPU.

    trainer-py/.venv/bin/python bench/trainer_greedy.py [--backends tiny qwen3 llama3] [--canaries 8]

Probes: --canaries canaries x 3 kinds (hidden, supplied, substituted), both decode modes. Prints
seconds per probe (both modes), model steps per decode (tokens fed after the prompt) and how many
decodes agree (the after text equals the before text cut where its code is decided; a free-mode
decode undecided at the old limit may run further after, to its derived limit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
from _common import probes

from canary_trainer.decode import decided, greedy_many, requests  # noqa: E402
from canary_trainer.greedy_batch import cut  # noqa: E402
from tests.greedy_ref import greedy_ids  # noqa: E402

DIGITS = "0123456789"


def backend(name: str):
    if name == "tiny":
        from canary_trainer.backends.tiny import TinyBackend

        spec = {"backend": "tiny", "name": "t", "init_seed": 0,
                "tiny": {"n_layer": 2, "n_head": 4, "d_model": 128, "max_len": 512, "dropout": 0.0}}
        b = TinyBackend(spec, torch.device("cpu"))
    else:
        from tests.hf_fixtures import build_hub, use_hub

        use_hub(build_hub())
        from tests.test_hf_backend import backend as hf

        b = hf(name)
    b.model.eval()
    return b


class Counter:
    """Counts model steps (one per generated position, per row) by wrapping the backend."""

    def __init__(self, b):
        self.steps = 0
        for name in ("greedy_step",):
            fn = getattr(b, name)

            def wrapped(state, tokens, fn=fn):
                self.steps += len(tokens)
                return fn(state, tokens)
            setattr(b, name, wrapped)


@torch.no_grad()
def before(b, ps: list[dict], limit: int) -> tuple[list, int]:
    outs, steps = [], 0
    for p in ps:
        for mode in p["decode"]:
            ctx = b.tokenize(b.render(p["prompt"]) + (p["prefill"] if mode == "prefill" else ""))
            ids = greedy_ids(b, ctx, limit)
            steps += len(ids)
            outs.append(ids)
    return outs, steps


@torch.no_grad()
def after(b, ps: list[dict], limit: int) -> list:
    return greedy_many(b, ps, limit, DIGITS, 4)


def run(name: str, args) -> dict:
    b = backend(name)
    ps = probes(args.canaries)
    count = Counter(b)
    t_before, t_after = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        old, old_steps = before(b, ps, args.max_new_tokens)
        t_before.append(time.perf_counter() - t0)
        count.steps = 0
        t0 = time.perf_counter()
        new = after(b, ps, args.max_new_tokens)
        t_after.append(time.perf_counter() - t0)
    rules = [r[2] for p in ps for r in requests(b, p["prompt"], p["prefill"], p["decode"], args.max_new_tokens,
                                                DIGITS, 4)]
    texts = [g["text"] for entry in new for g in entry.values()]
    agree = sum(b.decode(cut(b, ids, rule)) == t for ids, rule, t in zip(old, rules, texts))
    n, d = len(ps), 2 * len(ps)
    tb, ta = statistics.median(t_before), statistics.median(t_after)
    return {"backend": name, "probes": n, "before_s_per_probe": round(tb / n, 4), "after_s_per_probe": round(ta / n, 4),
            "speedup": round(tb / ta, 1), "before_steps_per_decode": round(old_steps / d, 1),
            "after_steps_per_decode": round((count.steps + d) / d, 1), "agree": f"{agree}/{d}",
            "decided_before_old_limit": sum(decided(t, DIGITS, 4, None) for t in texts[::2])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", nargs="+", default=["tiny", "qwen3", "llama3"])
    ap.add_argument("--canaries", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.backends:
        print(json.dumps(run(name, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
