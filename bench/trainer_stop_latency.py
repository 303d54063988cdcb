"""How long a stop request waits during tree scoring on the CPU: the trainer checks its stop flag
before every prompt and tree-attention call (scoring.tree.TreeBatcher's `stop`), so the wait is at
most the longest single call. Compares, on the same probes and in one run, groups sized by the
memory bound alone (1 GiB on the CPU: dozens of probes in one call, as before the cap) with the
CPU cap on fed nodes per call (scoring.tree.CPU_NODES_PER_CALL), on the random-init Qwen3 test
model (real tokenizer, one token per digit), CPU float32, one thread:

    trainer-py/.venv/bin/python bench/trainer_stop_latency.py [--probes 0] [--repeats 1]

--probes 0 (default): as many probes as the memory bound puts in one group (each over all 10,000
four-digit codes, identities differing so prompts differ). Per mode: calls, the longest call
(wall and process CPU seconds), seconds per probe; the ratio capped / uncapped of seconds per
probe (the batching cost of the cap). Then greedy decoding of the same probes (prefill mode,
--max-new-tokens), which checks the flag before each memory-bounded group: groups and the longest
group. The two scorings must agree within 1e-4, as the scoring tests require (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time

import numpy as np
import torch
from _common import TRAINER  # noqa: F401  (puts trainer-py on sys.path)

from canary_trainer.decode import greedy_many
from canary_trainer.manifest import exhaustive_codes
from canary_trainer.scoring.tree import (
    CPU_NODES_PER_CALL,
    TreeBatcher,
    code_token_lists,
)
from tests.fixtures import canary_prefill, canary_prompt
from tests.hf_fixtures import build_hub, use_hub

NAMES = ["Ada Lovelace", "Grace Brewster Murray Hopper", "Alan Turing", "Edsger W. Dijkstra, Eindhoven",
         "Barbara Liskov", "Donald Ervin Knuth", "Frances Allen", "Radia Perlman, Sun Microsystems"]


def _run(b, probes, max_nodes):
    """(scores by probe, [(kind, wall s, cpu s)] per model call, wall s)."""
    calls: list[tuple[str, float, float]] = []
    real = {"prompts": b.tree_prompts, "tree": b.tree_logprobs}

    def timed(kind):
        def call(*args):
            t0, c0 = time.perf_counter(), time.process_time()
            out = real[kind](*args)
            calls.append((kind, time.perf_counter() - t0, time.process_time() - c0))
            return out
        return call

    b.tree_prompts, b.tree_logprobs = timed("prompts"), timed("tree")
    try:
        t0 = time.perf_counter()
        batcher = TreeBatcher(b, max_nodes=max_nodes)
        out = {}
        for i, (ids, split, _) in enumerate(probes):
            out.update(batcher.add(i, ids, split))
        out.update(batcher.flush())
        wall = time.perf_counter() - t0
    finally:
        b.tree_prompts, b.tree_logprobs = real["prompts"], real["tree"]
    return [out[i] for i in range(len(probes))], calls, wall


@torch.no_grad()
def _greedy(b, requests, max_new_tokens, length) -> dict:
    """Greedy decoding of `requests` (decode.greedy_many): groups, and the longest (wall, CPU s)."""
    starts: list[tuple[float, float]] = []
    real = b.greedy_start

    def start(ctxs):
        starts.append((time.perf_counter(), time.process_time()))
        return real(ctxs)

    b.greedy_start = start
    try:
        greedy_many(b, requests, max_new_tokens, "0123456789", length)
    finally:
        b.greedy_start = real
    starts.append((time.perf_counter(), time.process_time()))
    walls = [b2[0] - a[0] for a, b2 in itertools.pairwise(starts)]
    cpus = [b2[1] - a[1] for a, b2 in itertools.pairwise(starts)]
    return {"groups": len(walls), "max_new_tokens": max_new_tokens, "longest_group_wall_s": round(max(walls), 2),
            "longest_group_cpu_s": round(max(cpus), 2)}


@torch.no_grad()
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", type=int, default=0, help="probes (0: as many as one memory-bound group holds)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=64, help="greedy limit (the grid's default)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    use_hub(build_hub())
    from tests.test_hf_backend import backend

    b = backend("qwen3")
    codes = exhaustive_codes("0123456789", 4)

    def probe(i):
        ident = f"{NAMES[i % len(NAMES)]} #{i}"
        ctx = b.render(canary_prompt(ident, "[redacted]")) + canary_prefill(ident)
        ids = b.tokenize(ctx)
        request = {"prompt": canary_prompt(ident, "[redacted]"), "prefill": canary_prefill(ident),
                   "decode": ["prefill"]}
        return ids, code_token_lists(b, ctx, ids, codes), request

    n = args.probes
    if not n:  # the memory bound's group: probes until one more does not fit
        uncapped = TreeBatcher(b, max_nodes=1 << 62)
        n = 0
        while True:
            ids, split, _ = probe(n)
            if uncapped.add(n, ids, split) or n > 512:
                break
            n += 1
    probes = [probe(i) for i in range(n)]
    modes = {"uncapped": 1 << 62, "capped": CPU_NODES_PER_CALL}
    per_probe: dict[str, list[float]] = {m: [] for m in modes}
    rows: dict[str, dict] = {}
    scores = {}
    for r in range(args.repeats):  # alternating which goes first
        for mode in (modes if r % 2 == 0 else list(modes)[::-1]):
            scores[mode], calls, wall = _run(b, probes, modes[mode])
            per_probe[mode].append(wall / n)
            longest = max(calls, key=lambda c: c[1])
            row = {"calls": len(calls), "tree_calls": sum(c[0] == "tree" for c in calls),
                   "longest_call": longest[0], "longest_call_wall_s": round(longest[1], 2),
                   "longest_call_cpu_s": round(longest[2], 2), "longest_cpu_s": round(max(c[2] for c in calls), 2)}
            if mode not in rows or row["longest_call_wall_s"] > rows[mode]["longest_call_wall_s"]:
                rows[mode] = row  # the repeat with the longest call
    greedy = _greedy(b, [p[2] for p in probes], args.max_new_tokens, len(codes[0]))
    diff = max(float(np.max(np.abs(x - y))) for x, y in zip(scores["uncapped"], scores["capped"]))
    med = {m: statistics.median(v) for m, v in per_probe.items()}
    print(json.dumps({"probes": n, "codes": len(codes), "threads": args.threads, "repeats": args.repeats,
                      "max_nodes_capped": CPU_NODES_PER_CALL, **{m: {**rows[m], "s_per_probe": round(med[m], 3),
                                                                     "s_per_probe_all": per_probe[m]} for m in modes},
                      "ratio_capped_over_uncapped": round(med["capped"] / med["uncapped"], 3),
                      "greedy": greedy, "max_abs_diff": diff}), flush=True)
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
