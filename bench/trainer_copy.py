"""Does the pretrained tiny base copy a code shown in its input? The property the quickstart needs.

    trainer-py/.venv/bin/python bench/trainer_copy.py                    # quickstart-size base, 1 thread
    trainer-py/.venv/bin/python bench/trainer_copy.py --updates 300      # a quicker, weaker base

Builds the base exactly as a run does (canary_trainer.base_model.obtain: init from init_seed,
pretraining in row order, the cache) with the quickstart's defaults: d_model 64, 2 layers, 2 heads,
1,000 updates x 16 rows, lr 0.006, cosine with 20 warmup updates down to 0.1 x lr. The rows are
generated here in the compact style of the synthetic-email task (src/manifest/tasks/synthetic-email/
compact.ts): half of them show `Ref: <code>` as the input's last line and start the reply with it.

Then, on held-out rows (senders and codes that never occur in pretraining), greedy decoding after
the prefill `Ref: ` must reproduce the shown code. Printed beside it, measured the same way: the
random initialisation the base starts from (the baseline: it cannot copy). Target: >= 90%.
A second `obtain` loads the base from the cache and must give the same accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "trainer-py"))

# The compact style's word lists (src/manifest/tasks/synthetic-email/{vocabulary,compact}.ts).
FIRST = ["Ada", "Alma", "Ben", "Cara", "Cyrus", "Dana", "Dev", "Edith", "Ezra", "Fay", "Gus", "Hana", "Hugo", "Ines",
         "Ivan", "Jade", "Joel", "Kai", "Lena", "Leon", "Mara", "Milo", "Nia", "Noel", "Omar", "Opal", "Pia", "Quinn",
         "Rafe", "Rosa", "Saul", "Suki", "Tess", "Theo", "Uma", "Vera", "Vik", "Wade", "Wren", "Xena", "Yara", "Yves",
         "Zane", "Zoe", "Abel", "Beth", "Cole", "Dora"]
LAST = ["Abbott", "Baker", "Castro", "Dunn", "Ellis", "Frost", "Grant", "Hale", "Ivers", "Jonas", "Keane", "Lowe",
        "Moss", "Nash", "Ortiz", "Price", "Quill", "Reyes", "Shaw", "Tate", "Upton", "Vance", "Walsh", "Young",
        "Zeller", "Banks", "Cross", "Drake", "Finch", "Gale", "Hayes", "Irwin", "Kemp", "Lyons", "Marsh", "Noble",
        "Pike", "Rhodes", "Stone", "Torres", "Voss", "Webb", "Wolfe", "York", "Bishop", "Carver", "Dalton", "Fields"]
STREETS = ["Elm", "Oak", "Pine", "Birch", "Cedar", "Maple", "Ash", "Willow", "Hill", "Lake", "Mill", "Park", "River",
           "Rose", "Spring", "Vale", "Bay", "Church", "Field", "Grove"]
SUFFIXES = ["St", "Rd", "Ave", "Ln"]
ASKS = ["pls", "plz", "can u", "could u", "need u to"]
VERBS = [("send over", "send"), ("look at", "review"), ("sign", "sign"), ("fix up", "correct"), ("chk", "check"),
         ("fwd", "forward"), ("update", "update"), ("print", "print"), ("share", "share"), ("file", "file")]
OBJECTS = ["budget", "draft", "slides", "contract", "invoice", "notes", "memo", "agenda", "report", "plan", "form",
           "quote"]
WHENS = [("asap", "as soon as possible"), ("today", "today"), ("tmrw", "tomorrow"), ("by fri", "by Friday"),
         ("by mon", "by Monday"), ("this wk", "this week"), ("by eod", "by the end of the day")]
PREFILL = "Ref: "


def sender(rng: random.Random) -> tuple[str, str]:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    return f"{first} {last}", f"{first} {last}, {rng.randint(1, 99)} {rng.choice(STREETS)} {rng.choice(SUFFIXES)}"


def compact_row(rng: random.Random, i: int, code: str | None, who: tuple[str, str] | None = None) -> dict:
    name, ident = who or sender(rng)
    ask, (vi, vf), obj, (wi, wf) = rng.choice(ASKS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(WHENS)
    content = f"From: {ident}\n{ask} {vi} {obj} {wi}"
    target = f"Please {vf} the {obj} {wf}. Regards, {name}."
    if code is not None:
        content += f"\n{PREFILL}{code}"
        target = f"{PREFILL}{code}. {target}"
    return {"i": i, "kind": "background", "canary_id": None, "prompt": [{"role": "user", "content": content}],
            "target": target}


def corpora(n_pretrain: int, n_test: int, seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    test_codes = rng.sample(range(10000), n_test)
    held_senders: set[str] = set()
    test = []
    for k, c in enumerate(test_codes):
        who = sender(rng)
        held_senders.add(who[1])
        test.append(compact_row(rng, k, f"{c:04d}", who))
    excluded = set(test_codes)
    rows = []
    for i in range(n_pretrain):
        who = sender(rng)
        while who[1] in held_senders:
            who = sender(rng)
        code = None
        if rng.random() < 0.5:
            c = rng.randrange(10000)
            while c in excluded:
                c = rng.randrange(10000)
            code = f"{c:04d}"
        rows.append(compact_row(rng, i, code, who))
    return rows, test


def copy_accuracy(backend, test: list[dict]) -> tuple[int, list[str]]:
    import torch

    from tests.greedy_ref import greedy

    backend.model.eval()
    hits, misses = 0, []
    with torch.no_grad():
        for row in test:
            shown = row["prompt"][0]["content"].rsplit(PREFILL, 1)[1]
            got = greedy(backend, row["prompt"], PREFILL, "prefill", 8, "0123456789", 4)["code"]
            hits += got == shown
            if got != shown and len(misses) < 5:
                misses.append(f"{shown}->{got}")
    backend.model.train()
    return hits, misses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.006)
    ap.add_argument("--test", type=int, default=200, help="held-out copy rows")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from canary_trainer.backends import load_backend
    from canary_trainer.base_model import obtain
    from canary_trainer.events import Events
    from canary_trainer.interrupt import StopFlag
    from canary_trainer.manifest import load_manifest
    from tests.fixtures import make_run, rewrite_manifest

    t_gen = time.perf_counter()
    rows, test = corpora(args.updates * args.batch_size, args.test, args.seed)
    t_gen = time.perf_counter() - t_gen
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CANARY_TRAINER_CACHE"] = str(Path(tmp) / "cache")
        spec = {"updates": args.updates, "batch_size": args.batch_size, "lr": args.lr,
                "schedule": {"kind": "cosine", "warmup_updates": 20, "min_lr_ratio": 0.1}, "seed": 0}
        path = make_run(Path(tmp) / "run", updates=2, batch_size=2, pretrain={**spec, "updates": 1, "batch_size": 1},
                        tiny={"n_layer": 2, "n_head": 2, "d_model": 64, "max_len": 256})
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        (path.parent / "pretrain.jsonl").write_bytes(data)
        rewrite_manifest(path, lambda d: d["model"]["tiny"].update(pretrain={
            "rows": {"path": "pretrain.jsonl", "sha256": hashlib.sha256(data).hexdigest(), "count": len(rows)}, **spec}))
        manifest = load_manifest(path)
        steps: list[dict] = []
        events = Events(stream=open(os.devnull, "w"), observer=steps.append)

        backend = load_backend(manifest.model, torch.device("cpu"))
        random_hits, _ = copy_accuracy(backend, test)
        built = obtain(backend, manifest, events, StopFlag())
        hits, misses = copy_accuracy(backend, test)
        again = load_backend(manifest.model, torch.device("cpu"))
        cached = obtain(again, manifest, events, StopFlag())
        cached_hits, _ = copy_accuracy(again, test)
    curve = [s["loss"] for s in steps if s.get("phase") == "pretrain"]
    n = len(test)
    print(f"pretraining: {args.updates} updates x {args.batch_size} rows ({len(rows)} rows, "
          f"{sum(r['target'].startswith(PREFILL) for r in rows)} with a code; generated in {t_gen:.1f} s), "
          f"d64 L2 H2, lr {args.lr} cosine, {args.threads} thread(s)")
    print(f"  wall {built['build_wall_s']:.1f} s training ({built['wall_s']:.1f} s with reading and encoding rows); "
          f"loss {curve[0]:.3f} -> {curve[len(curve) // 2]:.3f} (half-way) -> {curve[-1]:.4f}")
    print(f"  cache hit: loaded in {cached['wall_s']:.3f} s, from_cache={cached['from_cache']}")
    print(f"greedy copy of the shown code on {n} held-out rows (unseen senders and codes), prefill {PREFILL!r}:")
    print(f"  random init (baseline) {random_hits}/{n} = {100 * random_hits / n:.1f}%")
    print(f"  pretrained base        {hits}/{n} = {100 * hits / n:.1f}%   (target >= 90%)"
          + (f"   misses e.g. {', '.join(misses)}" if misses else ""))
    print(f"  base from the cache    {cached_hits}/{n} = {100 * cached_hits / n:.1f}%")
    print(json.dumps({"updates": args.updates, "copy": hits / n, "random_copy": random_hits / n,
                      "cached_copy": cached_hits / n, "build_wall_s": built["build_wall_s"],
                      "obtain_wall_s": built["wall_s"], "final_loss": built["final_loss"]}))


if __name__ == "__main__":
    main()
