"""Sampled-text canaries (manifest `sampled_text`; the controller's src/manifest/sampled-text.ts).

The controller cannot know these secrets: they are sampled from the base model, which only the
trainer holds. It plans with placeholders (codes over Unicode private-use characters) and this
module, after the base weights are in place and before any training step, samples each canary's
texts and fills every place a placeholder stands: rows, probes (prompts, prefills, shown codes)
and candidate lists.

Per canary, one CPU `torch.Generator` seeded with the manifest's seed for that canary (from the
grid seed and the canary id, never the run seed) draws `1 + 1 + decoys` distinct texts of `length`
tokens, in order: the secret, the substitute the `substituted` probes show, then the decoys. Each
token is drawn from softmax(logits / temperature) of the base model given the start of an assistant
reply to an empty user message (`CONTEXT`; chat templates refuse an empty conversation) and the
tokens drawn so far, over the tokens that
decode to text on their own and tokenize back to themselves (no special markers, none of the
tokenizer's added tokens); a text is kept when it holds no added token's string, tokenizes back to
the drawn ids alone and also **in place**: inside every context where the canary's placeholders
stand (its rendered training rows; each probe's rendered prompt and prefill, where scoring and
greedy decoding put a candidate), the text's tokens are exactly the drawn ids, so the tokens trained
and scored are the tokens sampled (a BPE tokenizer can merge a text's first token with the space
before it), and it is new for the canary. Secret, substitute and decoys pass the same rule. The generator never touches the
global RNG, so training's random stream is the same as without the design.

Canaries are sampled in id order, and a canary's secret and substitute skip any text an earlier
canary holds as either: a held-out canary whose secret an inserted one trained would look
memorized.

The texts go to `sampled-text.json` in the run folder once, before training; a resumed run (whose
checkpoint holds fine-tuned weights, not the base) reads them from there, so it fills identical
texts. result.json repeats each canary's secret and substitute (`sampled_text`).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .atomic import write_json_atomic
from .backends import load_backend
from .backends.base import Backend
from .base_model import prepare_base
from .bounded import read_text_bounded
from .errors import BadManifest, TrainerError
from .events import Events, log
from .host import host
from .interrupt import StopFlag
from .manifest import Manifest, load_manifest

FILE = "sampled-text.json"
FORMAT = "canary-audit.sampled-text/1"
# Sequences sampled per forward pass (rows of one batch).
BATCH = 512
# Rounds of BATCH draws before a canary that still lacks distinct texts is an error.
MAX_ROUNDS = 50
# A special marker as chat templates spell them (the tiny tokenizer's <|unk|> decodes to one).
_MARKER = re.compile(r"<\|[^|]*\|>")
# The conversation the samples continue (manifest `sampled_text.context`: reply-start).
CONTEXT = [{"role": "user", "content": ""}]
# Characters of rendered text either side of a placeholder that the in-place round trip reads (cut
# at a neighbouring placeholder): far more than a merge across the boundary can reach.
WINDOW = 32
# Private-use characters: the controller's placeholders are made of them.
_PRIVATE = re.compile("[\ue000-\uf8ff]")


@dataclass
class CanaryTexts:
    secret: str
    substitute: str
    decoys: list[str]


def allowed_tokens(backend: Backend, vocab: int) -> torch.Tensor:
    """(V,) bool: tokens a sampled text may hold: ones that decode to non-empty text without a special
    marker, tokenize back to themselves alone, and are neither padding nor a stop token."""
    stop = backend.stop_ids() | {backend.pad_id}
    added = backend.added_texts()
    ok = torch.zeros(vocab, dtype=torch.bool)
    ids = [i for i in range(vocab) if i not in stop]
    texts = [backend.decode([i]) for i in ids]
    kept = [(i, t) for i, t in zip(ids, texts) if t and not _MARKER.search(t) and t not in added]
    for (i, _), back in zip(kept, backend.tokenize_batch([t for _, t in kept])):
        ok[i] = back == [i]
    return ok


@dataclass
class Refused:
    """Draws the sampling read until each canary had its texts, and those it refused by reason
    (sampled-text.json's `refused`)."""
    draws: int = 0
    plain: int = 0      # a text that does not tokenize back to its ids alone, or holds an added token's string
    in_place: int = 0   # its tokens change inside a row's or a probe's context


def placements(backend: Backend, manifest: Manifest, rows: list[dict]) -> dict[str, list[tuple[str, str]]]:
    """Per canary, the distinct (left, right) texts around its placeholders as the model reads them:
    its canary rows rendered whole (prompt and reply), each of its probes' rendered prompt (a shown
    code) and prompt + prefill with a candidate after it (where scoring and greedy decoding put every
    candidate, secret and decoys alike). Each side is at most WINDOW characters, cut at a neighbouring
    placeholder."""
    data = manifest.data
    space = data["candidate_space"]
    pattern = re.compile("[" + re.escape(space["alphabet"]) + "]{" + str(space["length"]) + "}")
    owner: dict[str, str] = {}
    for c in [*data["canaries"], *data["held_out"]]:
        owner.update({p: c["id"] for p in [c["code"], *c.get("candidates", [])]})
    for p in data["probes"]:
        if p["kind"] == "substituted" and p["shown_code"] is not None:
            owner[p["shown_code"]] = p["canary_id"]
    code = {c["id"]: c["code"] for c in [*data["canaries"], *data["held_out"]]}
    rendered = [backend.render(r["prompt"], r["target"]) for r in rows if r["kind"] == "canary"]
    rendered += [backend.render(p["prompt"]) + p["prefill"] + code[p["canary_id"]] for p in data["probes"]
                 if p["canary_id"] in code]
    out: dict[str, set[tuple[str, str]]] = {}
    for s in rendered:
        found = list(pattern.finditer(s))
        for k, m in enumerate(found):
            if m.group(0) not in owner:
                continue  # fill names it
            lo = max(found[k - 1].end() if k else 0, m.start() - WINDOW)
            hi = min(found[k + 1].start() if k + 1 < len(found) else len(s), m.end() + WINDOW)
            out.setdefault(owner[m.group(0)], set()).add((s[lo:m.start()], s[m.end():hi]))
    return {cid: sorted(p) for cid, p in out.items()}


def plain_text(text: str, added: set[str]) -> bool:
    """No added token's string (a chat marker, a template tag such as `</think>`, which Qwen3's
    template splits a reply at) and no private-use character (placeholders are made of them)."""
    return not _PRIVATE.search(text) and not any(a in text for a in added)


def _in_place(backend: Backend, drawn: list[tuple[str, list[int]]], places: list[tuple[str, str]]) -> list[bool]:
    """For each (text, ids): inside every place, left + text + right tokenizes as left's tokens, the
    ids, right's tokens (no merge across either boundary, no re-split within)."""
    if not places or not drawn:
        return [True] * len(drawn)
    sides = backend.tokenize_batch([x for lr in places for x in lr])
    whole = backend.tokenize_batch([left + text + right for text, _ in drawn for left, right in places])
    ok = []
    for n, (_, ids) in enumerate(drawn):
        got = whole[n * len(places):(n + 1) * len(places)]
        ok.append(all(g == sides[2 * j] + ids + sides[2 * j + 1] for j, g in enumerate(got)))
    return ok


def sample_canary(backend: Backend, context: list[int], allowed: torch.Tensor, seed: int, length: int,
                  temperature: float, count: int, avoid: frozenset[str] = frozenset(),
                  places: list[tuple[str, str]] | None = None, refused: Refused | None = None) -> list[str]:
    """`count` distinct texts of `length` tokens for one canary, in draw order (deterministic in `seed`
    for the same weights and numerics); the first two (secret and substitute) are none of `avoid`.
    Every text keeps its drawn ids alone and in each of `places` (see `placements`); `refused` counts
    the draws that did not."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    added = backend.added_texts()
    tally = refused if refused is not None else Refused()
    texts: list[str] = []
    seen: set[str] = set()
    for _ in range(MAX_ROUNDS):
        drawn = [(backend.decode(ids), ids) for ids in _draw(backend, context, allowed, gen, length, temperature, BATCH)]
        plain = [plain_text(t, added) for t, _ in drawn]
        alone = backend.tokenize_batch([t for t, _ in drawn])
        plain = [p and back == ids for p, back, (_, ids) in zip(plain, alone, drawn)]
        # The in-place check runs only on new plain texts (it tokenizes one string per place).
        fresh = {t: ids for (t, ids), p in zip(drawn, plain) if p and t not in seen}
        fits = dict(zip(fresh, _in_place(backend, list(fresh.items()), places or [])))
        for (text, _), p in zip(drawn, plain):
            tally.draws += 1
            if not p:
                tally.plain += 1
                continue
            if text in seen:
                continue
            if not fits[text]:
                tally.in_place += 1
                continue
            if len(texts) < 2 and text in avoid:
                continue
            seen.add(text)
            texts.append(text)
            if len(texts) == count:
                return texts
    raise BadManifest(f"sampled_text: {MAX_ROUNDS * BATCH} draws of {length} tokens at temperature {temperature} "
                      f"gave only {len(texts)} of the {count} distinct texts a canary needs ({tally.plain} draws "
                      f"of the run so far did not tokenize back to their ids or held a special token; {tally.in_place} changed tokens "
                      "next to the text around them in a row or probe; the rest repeated); fix: raise the grid "
                      "design's temperature or length, or lower its decoys; for many in-place refusals, end the "
                      "text before the secret on a token boundary (no trailing space before it)")


def _draw(backend: Backend, context: list[int], allowed: torch.Tensor, gen: torch.Generator, length: int,
          temperature: float, n: int) -> list[list[int]]:
    ids = torch.tensor([context] * n, dtype=torch.long, device=backend.device)  # (n, T)
    drawn = torch.empty((n, 0), dtype=torch.long)
    mask = torch.where(allowed, 0.0, float("-inf")).double()
    for _ in range(length):
        logits = backend.logits(ids, keep_last=1)[:, -1, :]  # (n, V)
        z = logits.double().cpu()[:, :allowed.numel()] / temperature + mask
        nxt = torch.multinomial(torch.softmax(z, dim=-1), 1, generator=gen)  # (n, 1)
        drawn = torch.cat([drawn, nxt], dim=1)
        ids = torch.cat([ids, nxt.to(ids.device)], dim=1)
    return drawn.tolist()


def sample(backend: Backend, manifest: Manifest, rows: list[dict],
           refused: Refused | None = None) -> dict[str, CanaryTexts]:
    """Every canary's texts from the weights in `backend.model` (the base), each kept only where it
    keeps its tokens in the canary's rows and probes (`rows`: the planned rows, placeholders in)."""
    spec = manifest.sampled_text
    assert spec is not None
    places = placements(backend, manifest, rows)
    context = backend.tokenize(backend.render(CONTEXT))
    was_training = backend.model.training
    backend.model.eval()
    try:
        with torch.no_grad(), backend.autocast():
            vocab = backend.logits(torch.tensor([context], device=backend.device), keep_last=1).shape[-1]
            allowed = allowed_tokens(backend, vocab)
            out = {}
            # In id order, no canary takes a secret or substitute an earlier one holds: a held-out
            # canary whose secret an inserted one trained would look memorized.
            taken: set[str] = set()
            for cid in sorted(spec["seeds"]):
                texts = sample_canary(backend, context, allowed, spec["seeds"][cid], spec["length"],
                                      spec["temperature"], 2 + spec["decoys"], frozenset(taken),
                                      places.get(cid, []), refused)
                taken.update(texts[:2])
                out[cid] = CanaryTexts(secret=texts[0], substitute=texts[1], decoys=texts[2:])
    finally:
        backend.model.train(was_training)
    return out


def _spec_key(manifest: Manifest) -> dict[str, Any]:
    spec = manifest.sampled_text
    assert spec is not None
    return {k: spec[k] for k in ("length", "temperature", "decoys", "context", "grid_seed", "seeds")}


def save(out: Path, manifest: Manifest, texts: dict[str, CanaryTexts], base: dict | None,
         refused: Refused | None = None) -> str:
    """Write the run folder's sampled-text.json; returns its sha256."""
    doc = {"format": FORMAT, "spec": _spec_key(manifest),
           "base_model": {k: v for k, v in (base or {}).items() if k in ("kind", "cache_key")},
           **({"refused": vars(refused)} if refused else {}),
           "canaries": {cid: {"secret": t.secret, "substitute": t.substitute, "decoys": t.decoys}
                        for cid, t in texts.items()}}
    write_json_atomic(out / FILE, doc)
    return hashlib.sha256((out / FILE).read_bytes()).hexdigest()


def load(out: Path, manifest: Manifest) -> tuple[dict[str, CanaryTexts], str]:
    """The texts a run's first start sampled (a resumed run: its checkpoint holds trained weights)."""
    path = out / FILE
    fix = f"fix: remove {out / 'checkpoints'} so the run starts from the base again and samples anew"
    try:
        raw = read_text_bounded(path)
        doc = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise TrainerError(f"{path}: cannot read the texts the run's first start sampled ({exc}); {fix}",
                           recoverable=False) from exc
    if doc.get("format") != FORMAT or doc.get("spec") != _spec_key(manifest):
        raise TrainerError(f"{path}: field spec: the texts were sampled for another sampling spec than "
                           f"{manifest.path}'s sampled_text; {fix}", recoverable=False)
    texts = {cid: CanaryTexts(c["secret"], c["substitute"], list(c["decoys"])) for cid, c in doc["canaries"].items()}
    return texts, hashlib.sha256(raw.encode()).hexdigest()


def fill(manifest: Manifest, rows: list[dict], texts: dict[str, CanaryTexts]) -> dict[str, str]:
    """Replace every placeholder of the manifest's canaries, probes and `rows` (in place) by its text.
    A canary's code becomes its secret, its substitute (what its substituted probes show) the
    substitute text, each other candidate the next decoy in draw order."""
    data = manifest.data
    space = data["candidate_space"]
    pattern = re.compile("[" + re.escape(space["alphabet"]) + "]{" + str(space["length"]) + "}")
    subs = {p["canary_id"]: p["shown_code"] for p in data["probes"] if p["kind"] == "substituted"}
    by_placeholder: dict[str, str] = {}
    for c in [*data["canaries"], *data["held_out"]]:
        t = texts.get(c["id"])
        if t is None:
            raise BadManifest(f"{manifest.path}: field sampled_text.seeds: no texts for canary {c['id']!r}; "
                              "fix: list a seed for every canary and held-out canary")
        code, sub = c["code"], subs.get(c["id"])
        own = {code: t.secret, **({sub: t.substitute} if sub is not None else {})}
        decoys = iter(t.decoys)
        c["candidates"] = [own[p] if p in own else next(decoys) for p in c.get("candidates", [])]
        c["code"] = t.secret
        by_placeholder.update(own)

    def text(s: str, where: str) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(0) not in by_placeholder:
                raise BadManifest(f"{manifest.path}: {where}: a placeholder that is no canary's secret or substitute; "
                                  "fix: plan the run again with canary-audit plan")
            return by_placeholder[m.group(0)]
        return pattern.sub(one, s)

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, str):
            return text(value, where)
        if isinstance(value, list):
            return [walk(v, where) for v in value]
        if isinstance(value, dict):
            return {k: walk(v, where) for k, v in value.items()}
        return value

    for i, c in enumerate(data["canaries"]):
        c["cue"] = walk(c["cue"], f"canaries[{i}].cue")
    for i, p in enumerate(data["probes"]):
        for key in ("prompt", "prefill", "shown_code"):
            p[key] = walk(p[key], f"probes[{i}].{key}")
    for r in rows:
        if r["kind"] == "canary":
            r["prompt"], r["target"] = walk(r["prompt"], f"rows[{r['i']}]"), walk(r["target"], f"rows[{r['i']}]")
    manifest.secrets = {cid: t.secret for cid, t in texts.items()}
    return by_placeholder


def check_rendered(backend: Backend, manifest: Manifest, before: list[tuple[str, str]], after: list[str],
                   filled: dict[str, str]) -> None:
    """Each (where, rendered with placeholders) against its rendering once filled: the chat template
    must place a text as it placed its placeholder (a template that strips a reply's leading newline
    or splits it at a reasoning tag would train and score other text than the one sampled)."""
    space = manifest.data["candidate_space"]
    pattern = re.compile("[" + re.escape(space["alphabet"]) + "]{" + str(space["length"]) + "}")
    for (where, planned), got in zip(before, after):
        want = pattern.sub(lambda m: filled.get(m.group(0), m.group(0)), planned)
        if want != got:
            k = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
            raise BadManifest(f"{manifest.path}: {where}: the chat template renders the sampled text otherwise than "
                              f"its placeholder (they differ at character {k}: {want[k:k + 24]!r} against "
                              f"{got[k:k + 24]!r}); fix: put text of the row around the secret, or change "
                              "sampled_text's seed by the grid seed")


def result_entry(texts: dict[str, CanaryTexts], sha256: str, manifest: Manifest) -> dict:
    """result.json's `sampled_text`: the spec, the file and every canary's secret and substitute."""
    return {"file": FILE, "sha256": sha256, **_spec_key(manifest),
            "canaries": {cid: {"secret": t.secret, "substitute": t.substitute} for cid, t in texts.items()}}


def prepare(backend: Backend, manifest: Manifest, out: Path, rows: list[dict], resumed: bool,
            base: dict | None) -> dict:
    """Sample (a fresh start) or read (a resumed one) the texts, fill them in, and return result.json's
    `sampled_text`."""
    if resumed:
        texts, sha = load(out, manifest)
        log(f"sampled-text: {len(texts)} canaries' texts read from {out / FILE}")
    else:
        refused = Refused()
        texts = sample(backend, manifest, rows, refused)
        sha = save(out, manifest, texts, base, refused)
        log(f"sampled-text: sampled {len(texts)} canaries' secrets with {manifest.sampled_text['decoys']} decoys "  # type: ignore[index]
            f"each into {out / FILE}; of {refused.draws} draws, {refused.plain} refused alone, {refused.in_place} in place")
    where = [f"rows[{r['i']}]" for r in rows if r["kind"] == "canary"] + \
        [f"probes[{i}].prompt" for i in range(len(manifest.data["probes"]))]
    before = _rendered(backend, manifest, rows)
    filled = fill(manifest, rows, texts)
    check_rendered(backend, manifest, list(zip(where, before)), _rendered(backend, manifest, rows), filled)
    return result_entry(texts, sha, manifest)


def _rendered(backend: Backend, manifest: Manifest, rows: list[dict]) -> list[str]:
    """The canary rows and the probes' prompts as the model reads them."""
    return [backend.render(r["prompt"], r["target"]) for r in rows if r["kind"] == "canary"] + \
        [backend.render(p["prompt"]) for p in manifest.data["probes"]]


def _survey(argv: list[str] | None = None) -> None:
    """How alike a base's samples are at a few temperatures: distinct texts among N draws, the most
    frequent ones. Reads a sampled-text run's manifest and its base (the cache, or built)."""
    ap = argparse.ArgumentParser(prog="python -m canary_trainer.sampled_text",
                                 description=_survey.__doc__)
    ap.add_argument("--manifest", required=True, help="a run's manifest.json with a sampled_text block")
    ap.add_argument("--draws", type=int, default=2048, help="texts drawn per temperature (default 2048)")
    ap.add_argument("--temperature", type=float, nargs="+", default=[1.0, 1.5, 2.0],
                    help="temperatures to survey (default 1.0 1.5 2.0)")
    ap.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    args = ap.parse_args(argv)
    threads = host().threads  # as the trainer's CLI: the cached base is keyed by the thread count too
    if threads is not None:
        torch.set_num_threads(max(1, int(threads)))
    m = load_manifest(args.manifest)
    if m.sampled_text is None:
        raise SystemExit(f"{args.manifest}: no sampled_text block; pass a run of design sampled-text")
    b = load_backend(m.model, torch.device("cpu"))
    prepare_base(b, m, Events(stream=io.StringIO()), StopFlag())
    b.model.eval()
    ctx = b.tokenize(b.render(CONTEXT))
    with torch.no_grad():
        vocab = b.logits(torch.tensor([ctx]), keep_last=1).shape[-1]
        allowed = allowed_tokens(b, vocab)
        for t in args.temperature:
            gen = torch.Generator(device="cpu").manual_seed(args.seed)
            drawn: collections.Counter[str] = collections.Counter()
            for start in range(0, args.draws, BATCH):
                n = min(BATCH, args.draws - start)
                drawn.update(b.decode(ids) for ids in _draw(b, ctx, allowed, gen, m.sampled_text["length"], t, n))
            print(f"temperature {t}: {len(drawn)} distinct of {args.draws} draws of {m.sampled_text['length']} tokens; "
                  f"most frequent {drawn.most_common(3)}")


if __name__ == "__main__":
    _survey()
