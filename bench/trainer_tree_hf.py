"""Token-level prefix tree (tree attention, shared prompt cache) vs an lm-eval-style batched
per-candidate baseline, on the random-init test models with real tokenizers (Qwen3: one token per
digit; Llama 3: digit groups), CPU float32, interleaved in one run.

    trainer-py/.venv/bin/python bench/trainer_tree_hf.py [--families qwen3 llama3] [--slice 400]
    trainer-py/.venv/bin/python bench/trainer_tree_hf.py --mode probes [--probes 4] [--repeats 2]

Per family: one probe over all 10,000 four-digit codes by the tree (time per probe, nodes fed); the
baseline scores a slice of the same codes one right-padded sequence each (`score_per_candidate`,
batch size tuned first among --batches) and its time is scaled to 10,000 (candidates/s is what a
probe costs). Tree and baseline alternate --repeats times; medians are compared. The two must
agree within 1e-4 on the slice (exit 1 otherwise). Forward positions: the tree feeds its internal
nodes once on top of the prompt (plus the prompt once); the baseline feeds prompt + code per
candidate.

--mode probes: --probes probes (different identities, so prompts of different lengths), each over
all 10,000 codes, scored by the tree one probe per call (TreeBatcher max_probes=1: one prompt call
and one tree call per probe, as before batching) and batched across probes (prompts left-padded
and run together, trees in one call, probes per call from the memory bound: 1 GiB on CPU, and on
the CPU at most scoring.tree.CPU_NODES_PER_CALL fed nodes per call since 2026-12-05),
alternating which goes first, --repeats times; medians and their ratio. The two must agree within
1e-4, and the batched scores must equal per-candidate scoring on --slice codes of each probe
(exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np
import torch
from _common import timed

from canary_trainer.batches import right_pad  # noqa: E402
from canary_trainer.manifest import exhaustive_codes  # noqa: E402
from canary_trainer.scoring.tree import TreeBatcher, build_chunks, code_token_lists, score_trie  # noqa: E402
from canary_trainer.scoring.walk import score_per_candidate  # noqa: E402
from tests.fixtures import canary_prefill, canary_prompt  # noqa: E402
from tests.hf_fixtures import build_hub, use_hub  # noqa: E402


def _backend(family: str):
    from tests.test_hf_backend import backend

    return backend(family)


@torch.no_grad()
def lm_eval_style(b, ctx: str, ids: list[int], codes: list[str], batch: int) -> np.ndarray:
    """As lm-eval-harness's loglikelihood: context + continuation right-padded in batches, logits
    and log-softmax over every position, the continuation's tokens gathered."""
    seqs = b.tokenize_batch([ctx + c for c in codes])
    out = np.zeros(len(codes))
    for s in range(0, len(seqs), batch):
        chunk = seqs[s: s + batch]
        x = right_pad(chunk, b.pad_id)
        lp = torch.log_softmax(b.logits(x).float(), dim=-1)
        for r, q in enumerate(chunk):
            pos = torch.arange(len(ids) - 1, len(q) - 1)
            out[s + r] = float(lp[r, pos, torch.tensor(q[len(ids):])].double().sum())
    return out


def _timed(fn):
    """(result, wall seconds)."""
    out, wall, _ = timed(fn)
    return out, wall


@torch.no_grad()
def bench_family(family: str, args) -> dict:
    b = _backend(family)
    ctx = b.render(canary_prompt("Ada Lovelace #0", "[redacted]")) + canary_prefill("Ada Lovelace #0")
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 4)
    split, tok_s = _timed(lambda: code_token_lists(b, ctx, ids, codes))
    k, spans = split
    nodes = sum(len(c.token) for c in build_chunks(spans, 1 << 30))
    rng = np.random.default_rng(0)
    picked = sorted(rng.choice(len(codes), args.slice, replace=False).tolist())
    sub = [codes[i] for i in picked]
    baselines = {"lm_eval": lambda n, batch: lm_eval_style(b, ctx, ids, sub[:n], batch),
                 "per_candidate": lambda n, batch: score_per_candidate(b, ctx, ids, sub[:n], batch=batch)}
    tuned = {name: _tune(fn, args.batches) for name, fn in baselines.items()}
    times: dict[str, list[float]] = {"tree": [], **{name: [] for name in baselines}}
    diff = 0.0
    for _ in range(args.repeats):  # interleaved
        fast, s = _timed(lambda: score_trie(b, ids, split))
        times["tree"].append(s)
        for name, fn in baselines.items():
            slow, s = _timed(lambda fn=fn, name=name: fn(len(sub), tuned[name]))
            times[name].append(s * len(codes) / len(sub))
            diff = max(diff, float(np.max(np.abs(fast[picked] - slow))))
    med = {name: statistics.median(v) for name, v in times.items()}
    return {"family": family, "context_tokens": len(ids), "tree_root_tokens": k,
            "code_depths": sorted({len(s) for s in spans}), "tree_nodes_fed": nodes,
            "positions_tree": nodes + len(ids), "positions_baseline": sum(k + len(s) for s in spans),
            "tokenize_s": round(tok_s, 3), "batch": tuned, "tree_s_per_probe": round(med["tree"], 3),
            **{f"{n}_s_per_probe": round(med[n], 2) for n in baselines},
            **{f"ratio_vs_{n}": round(med[n] / med["tree"], 1) for n in baselines}, "max_abs_diff": diff}


IDENTITIES = ["Ada Lovelace #0", "Grace Brewster Murray Hopper #12", "Alan Turing #7",
              "Edsger W. Dijkstra, Eindhoven #3", "Barbara Liskov #45", "Donald Ervin Knuth #101",
              "Frances Allen #9", "Radia Perlman, Sun Microsystems #2"]


def _batched(b, probes, max_probes):
    batcher = TreeBatcher(b, max_probes)
    out = {}
    for i, (ids, split) in enumerate(probes):
        out.update(batcher.add(i, ids, split))
    out.update(batcher.flush())
    return [out[i] for i in range(len(probes))], batcher.calls


@torch.no_grad()
def bench_probes(family: str, args) -> dict:
    b = _backend(family)
    codes = exhaustive_codes("0123456789", 4)
    probes, ctxs = [], []
    for ident in (IDENTITIES * 8)[: args.probes]:
        ctx = b.render(canary_prompt(ident, "[redacted]")) + canary_prefill(ident)
        ids = b.tokenize(ctx)
        probes.append((ids, code_token_lists(b, ctx, ids, codes)))
        ctxs.append(ctx)
    times: dict[str, list[float]] = {"one": [], "batched": []}
    calls, out = {}, {}
    for r in range(args.repeats):  # interleaved, alternating which goes first
        for name in (("one", "batched") if r % 2 == 0 else ("batched", "one")):
            (scores, calls[name]), s = _timed(lambda name=name: _batched(b, probes, 1 if name == "one" else None))
            times[name].append(s / len(probes))
            out[name] = scores
    diff = max(float(np.max(np.abs(x - y))) for x, y in zip(out["one"], out["batched"]))
    rng = np.random.default_rng(0)
    picked = sorted(rng.choice(len(codes), args.slice, replace=False).tolist())
    slow = [score_per_candidate(b, ctx, ids, [codes[i] for i in picked], batch=128)
            for ctx, (ids, _) in zip(ctxs, probes)]
    diff_pc = max(float(np.max(np.abs(x[picked] - y))) for x, y in zip(out["batched"], slow))
    med = {name: statistics.median(v) for name, v in times.items()}
    nodes = [len(build_chunks(split[1], 1 << 30)[0].token) for _, split in probes]
    return {"family": family, "probes": len(probes), "prompt_tokens": sorted({len(ids) for ids, _ in probes}),
            "nodes_per_probe": max(nodes), "calls_one": calls["one"], "calls_batched": calls["batched"],
            "one_s_per_probe": round(med["one"], 3), "batched_s_per_probe": round(med["batched"], 3),
            "ratio": round(med["one"] / med["batched"], 2), "repeats_s_per_probe": times,
            "max_abs_diff_one_vs_batched": diff, "max_abs_diff_vs_per_candidate": diff_pc}


def _tune(fn, batches: list[int]) -> int:
    """The batch size with the best candidates/s on a short slice."""
    rates = {}
    for batch in batches:
        _, s = _timed(lambda batch=batch: fn(2 * batch, batch))
        rates[batch] = s / (2 * batch)
    return min(rates, key=rates.get)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--slice", type=int, default=400, help="baseline candidates per repeat")
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 64, 128])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", choices=["candidates", "probes"], default="candidates",
                    help="candidates: tree vs per-candidate baselines; probes: one probe per call vs batched")
    ap.add_argument("--probes", type=int, default=4, help="--mode probes: probes scored per repeat")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    use_hub(build_hub())
    ok = True
    for family in args.families:
        if args.mode == "probes":
            row = bench_probes(family, args)
            ok &= row["max_abs_diff_one_vs_batched"] < 1e-4 and row["max_abs_diff_vs_per_candidate"] < 1e-4
        else:
            row = bench_family(family, args)
            ok &= row["max_abs_diff"] < 1e-4
        print(json.dumps(row), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
