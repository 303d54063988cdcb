"""The trainer's batched greedy decoding (`decode.greedy_many`: left-padded batches across probes,
argmax on the device, early stop once the code is decided) vs transformers' own batched
`model.generate()` (greedy, left-padded, the same prompts, the same stop tokens and limits), on the
random-init Qwen3 and Llama 3 test models, CPU float32, one thread, interleaved:

    CANARY_TRAINER_THREADS=1 bench/.venv-anchors/bin/python bench/anchor_greedy.py [--families qwen3 llama3]
        [--canaries 8] [--batches 8 16 48] [--repeats 3]

(runs with trainer-py/.venv too: it needs only transformers.) Probes: --canaries canaries x 3 kinds
(hidden, supplied, substituted), both decode modes (prefill: `eval.max_new_tokens` 64; free: its
derived limit). `generate()` gets each mode's rows sorted by length in batches of --batches (the
best of them, by CPU time, is tuned first for each of its two forms), `max_new_tokens` = the mode's limit,
`eos_token_id` = every stop token, and is timed two ways:
  generate       each row runs to a stop token or the limit (generate() has no "code decided" rule);
  generate_stop  the same with a StoppingCriteria that ends a row once its code is decided (the
                 trainer's rule, `decode.decided`, checked after every token), so a batch stops once
                 every row's code is decided: the trainer's early stop given to generate().
The ratio over generate_stop is the batching and the decoding loop alone; over generate it adds the
early stop. Agreement: each form's tokens cut where the trainer's rule says the code is decided
equal the trainer's text, row by row (exit 1 on any difference). The share of generate_stop's CPU
time spent in its StoppingCriteria is printed (min-max over repeats). One JSON line per family:
medians (wall seconds per probe), spreads, the ratios in wall and in CPU seconds (one thread: on a
shared machine the CPU ratio is the steadier measure), each with its min/max spread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from _common import each_family, probes, setup_hf, spread, timed
from transformers import StoppingCriteria, StoppingCriteriaList

from canary_trainer.decode import greedy_many, requests  # noqa: E402
from canary_trainer.greedy_batch import cut  # noqa: E402

DIGITS = "0123456789"


class CodeDecided(StoppingCriteria):
    """Ends each row of a generate() batch once its code is decided: the trainer's rule for that
    row, on the text generated so far (up to its first stop token). Once decided, a row stays
    decided (no continuation can change the code), so each row is decoded until it is."""

    seconds = 0.0  # CPU seconds spent in the check, over every instance (its own cost, reported)

    def __init__(self, b, width: int, rules: list, stop: set[int]):
        self.b, self.width, self.rules, self.stop = b, width, rules, stop
        self.done = [False] * len(rules)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.BoolTensor:
        c0 = time.process_time()
        rows = input_ids[:, self.width:].tolist()  # (B, generated so far)
        for r, toks in enumerate(rows):
            if not self.done[r]:
                end = next((j for j, t in enumerate(toks) if t in self.stop), len(toks))
                self.done[r] = end < len(toks) or self.rules[r](self.b.decode(toks[:end]))
        CodeDecided.seconds += time.process_time() - c0
        return torch.tensor(self.done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]


@torch.no_grad()
def hf_generate(b, reqs: list[tuple], batch: int, early_stop: bool = False) -> list[list[int]]:
    """Each request's generated tokens (stop token excluded), by batched model.generate();
    early_stop: with the trainer's "code decided" rule as a StoppingCriteria (`CodeDecided`)."""
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
            criteria = StoppingCriteriaList([CodeDecided(b, width, [reqs[i][2] for i in part], set(stop))]
                                            if early_stop else [])
            gen = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=limit,
                                 eos_token_id=stop, pad_token_id=pad, temperature=None, top_p=None, top_k=None,
                                 stopping_criteria=criteria)
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
    forms = {"generate": False, "generate_stop": True}
    with torch.no_grad():  # warm-up (first calls, allocator) before the tuning and the timed repeats
        greedy_many(b, ps, 64, DIGITS, 4)
    hf_generate(b, reqs, args.batches[0], True)
    rates: dict[str, dict[int, float]] = {}
    best: dict[str, int] = {}
    for form, early in forms.items():
        rates[form] = {}
        for batch in args.batches:
            _, _, c = timed(lambda batch=batch, early=early: hf_generate(b, reqs, batch, early))
            rates[form][batch] = round(c / len(ps), 4)
        best[form] = min(rates[form], key=rates[form].__getitem__)
    names = ["trainer", *forms]
    times: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    check: list[float] = []  # share of generate_stop's CPU time spent in its StoppingCriteria
    ours = None
    ref: dict[str, list[list[int]]] = {}
    for r in range(args.repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            if name == "trainer":
                with torch.no_grad():
                    ours, s, c = timed(lambda: greedy_many(b, ps, 64, DIGITS, 4))
            else:
                if name == "generate_stop":
                    CodeDecided.seconds = 0.0
                ref[name], s, c = timed(lambda name=name: hf_generate(b, reqs, best[name], forms[name]))
                if name == "generate_stop":
                    check.append(CodeDecided.seconds / c)
            times[name].append(s / len(ps))
            cpu[name].append(c / len(ps))
    assert ours is not None
    texts = [g["text"] for entry in ours for g in entry.values()]
    agree = {form: sum(b.decode(cut(b, ids, rule)) == t for ids, (_, _, rule), t in zip(ref[form], reqs, texts))
             for form in forms}
    med = {k: statistics.median(v) for k, v in times.items()}
    row = {"family": family, "probes": len(ps), "decodes": len(reqs), "repeats": args.repeats,
           "trainer_s_per_probe": round(med["trainer"], 4), "trainer_spread": spread(times["trainer"], 4)}
    for form in forms:
        row.update({f"{form}_batch": best[form], f"{form}_tuning_cpu_s_per_probe": rates[form],
                    f"{form}_s_per_probe": round(med[form], 4), f"{form}_spread": spread(times[form], 4),
                    f"ratio_{form}": round(med[form] / med["trainer"], 2),
                    f"ratio_{form}_spread": [round(min(times[form]) / max(times["trainer"]), 2),
                                             round(max(times[form]) / min(times["trainer"]), 2)],
                    f"ratio_{form}_cpu": round(statistics.median(cpu[form]) / statistics.median(cpu["trainer"]), 2),
                    f"ratio_{form}_cpu_spread": [round(min(cpu[form]) / max(cpu["trainer"]), 2),
                                                 round(max(cpu[form]) / min(cpu["trainer"]), 2)],
                    f"{form}_tokens_per_decode": round(sum(len(x) for x in ref[form]) / len(ref[form]), 1),
                    f"{form}_agree": f"{agree[form]}/{len(reqs)}"})
    row["generate_stop_criterion_cpu_share"] = spread(check, 3)
    row["ok"] = all(n == len(reqs) for n in agree.values())
    return row


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
