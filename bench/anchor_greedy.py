"""The trainer's batched greedy decoding (`decode.greedy_many`: left-padded batches across probes,
argmax on the device, early stop once the code is decided) vs transformers' own batched
`model.generate()` (greedy, left-padded, the same prompts, the same stop tokens and limits), on the
random-init Qwen3 and Llama 3 test models, CPU float32, one thread, interleaved:

    CANARY_TRAINER_THREADS=1 bench/.venv-anchors/bin/python bench/anchor_greedy.py [--families qwen3 llama3]
        [--canaries 8] [--batches 8 16 48] [--repeats 3]

(runs with trainer-py/.venv too: it needs only transformers.) Probes: --canaries canaries x 3 kinds
(hidden, supplied, substituted), both decode modes (prefill: `eval.max_new_tokens` 64; free: its
derived limit). `generate()` gets each mode's rows sorted by length in batches of --batches (the
best of them is tuned first), `max_new_tokens` = the mode's limit, `eos_token_id` = every stop
token, and runs each row to a stop token or the limit (it has no "code decided" rule). Agreement:
generate's tokens cut where the trainer's rule says the code is decided equal the trainer's text,
row by row (exit 1 on any difference). One JSON line per family: medians, spreads, the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
from _common import each_family, probes, setup_hf, spread, timed

from canary_trainer.decode import greedy_many, requests  # noqa: E402
from canary_trainer.greedy_batch import cut  # noqa: E402

DIGITS = "0123456789"


@torch.no_grad()
def hf_generate(b, reqs: list[tuple], batch: int) -> list[list[int]]:
    """Each request's generated tokens (stop token excluded), by batched model.generate()."""
    model, pad = b.base_model, b.pad_id
    stop = sorted(b.stop_ids())
    out: list[list[int] | None] = [None] * len(reqs)
    by_limit: dict[int, list[int]] = {}
    for i, (_, limit, _) in enumerate(reqs):
        by_limit.setdefault(limit, []).append(i)
    for limit, idx in by_limit.items():
        idx = sorted(idx, key=lambda i: len(reqs[i][0]))
        for s in range(0, len(idx), batch):
            part = idx[s: s + batch]
            width = max(len(reqs[i][0]) for i in part)
            ids = torch.full((len(part), width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for r, i in enumerate(part):
                ctx = reqs[i][0]
                ids[r, width - len(ctx):] = torch.tensor(ctx)
                mask[r, width - len(ctx):] = 1
            gen = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=limit,
                                 eos_token_id=stop, pad_token_id=pad, temperature=None, top_p=None, top_k=None)
            for r, i in enumerate(part):
                toks = gen[r, width:].tolist()
                end = next((j for j, t in enumerate(toks) if t in stop), len(toks))
                out[i] = toks[:end]
    return out  # type: ignore[return-value]


def _reqs(b, ps):
    return [req for p in ps for req in requests(b, p["prompt"], p["prefill"], p["decode"], 64, DIGITS, 4)]


def run(family: str, args) -> dict:
    from tests.test_hf_backend import backend

    b = backend(family)
    b.model.eval()
    ps = probes(args.canaries)
    reqs = _reqs(b, ps)
    rates = {}
    for batch in args.batches:
        _, s, _ = timed(lambda batch=batch: hf_generate(b, reqs, batch))
        rates[batch] = round(s / len(ps), 4)
    batch = min(rates, key=rates.get)
    times: dict[str, list[float]] = {"trainer": [], "generate": []}
    ours = ref = None
    for r in range(args.repeats):
        for name in (("trainer", "generate") if r % 2 == 0 else ("generate", "trainer")):
            if name == "trainer":
                with torch.no_grad():
                    ours, s, _ = timed(lambda: greedy_many(b, ps, 64, DIGITS, 4))
            else:
                ref, s, _ = timed(lambda: hf_generate(b, reqs, batch))
            times[name].append(s / len(ps))
    texts = [g["text"] for entry in ours for g in entry.values()]
    agree = sum(b.decode(cut(b, ids, rule)) == t for ids, (_, _, rule), t in zip(ref, reqs, texts))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"family": family, "probes": len(ps), "decodes": len(reqs), "repeats": args.repeats,
            "generate_batch": batch, "generate_tuning_s_per_probe": rates,
            "trainer_s_per_probe": round(med["trainer"], 4), "trainer_spread": spread(times["trainer"], 4),
            "generate_s_per_probe": round(med["generate"], 4), "generate_spread": spread(times["generate"], 4),
            "ratio": round(med["generate"] / med["trainer"], 2),
            "ratio_spread": [round(min(times["generate"]) / max(times["trainer"]), 2),
                             round(max(times["generate"]) / min(times["trainer"]), 2)],
            "generate_tokens_per_decode": round(sum(len(x) for x in ref) / len(ref), 1),
            "agree": f"{agree}/{len(reqs)}", "ok": agree == len(reqs)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="+", default=["qwen3", "llama3"])
    ap.add_argument("--canaries", type=int, default=8)
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 16, 48])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    setup_hf()
    return each_family(args.families, lambda family: run(family, args), lambda row: row["ok"])


if __name__ == "__main__":
    sys.exit(main())
