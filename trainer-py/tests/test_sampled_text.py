"""Sampled-text canaries (manifest `sampled_text`): the trainer samples each canary's secret and
decoys from the base before training, deterministically in the canary's seed, fills every
placeholder, and a resumed run refills the same texts from the run folder."""

import io
import json
import re
from pathlib import Path

import pytest
import torch

from canary_trainer import sampled_text
from canary_trainer.backends import load_backend
from canary_trainer.decode import decided_text, extract_text
from canary_trainer.errors import BadManifest, Interrupted
from canary_trainer.events import Events
from canary_trainer.manifest import load_manifest
from canary_trainer.run import RunOptions, run

from .conftest import run_here
from .fixtures import _file_ref, make_run, rewrite_manifest
from .hf_fixtures import hub_env  # noqa: F401  (fixture)

# The controller's placeholder alphabet (src/manifest/sampled-text.ts): U+E000-U+E00F.
ALPHABET = "".join(chr(0xE000 + i) for i in range(16))
PLACEHOLDER = re.compile(f"[{ALPHABET}]")
LENGTH, DECOYS = 5, 12


def _ph(n: int) -> str:
    """The n-th placeholder: six private-use characters (base 16)."""
    return "".join(ALPHABET[(n >> (4 * k)) & 15] for k in range(6))


def sampled_run(folder: Path, **kw) -> Path:
    """A make_run manifest turned into a planned sampled-text run: every code, substitute and
    candidate a placeholder (as the controller writes them), visible cues so rows and probes hold
    them too, and the sampled_text block."""
    path = make_run(folder, visibility="visible", length=4, **kw)
    data = json.loads(path.read_text())
    rows = [json.loads(x) for x in (folder / "rows.jsonl").read_text().splitlines()]
    swap: dict[str, str] = {}
    n = 0
    for c in data["canaries"] + data["held_out"]:
        swap[c["code"]] = _ph(n)
        c["code"] = _ph(n)
        c["candidates"] = [_ph(n)] + [_ph(1000 + j) for j in range(DECOYS)]
        n += 1
    for p in data["probes"]:
        if p["shown_code"] is not None:
            swap.setdefault(p["shown_code"], _ph(500 + n))
            n += 1

    def sub(s: str) -> str:
        for code, ph in swap.items():
            s = s.replace(code, ph)
        return s

    for c in data["canaries"]:
        c["cue"]["text"] = sub(c["cue"]["text"])
    for p in data["probes"]:
        p["shown_code"] = None if p["shown_code"] is None else sub(p["shown_code"])
        p["prompt"] = [{**m, "content": sub(m["content"])} for m in p["prompt"]]
        p["prefill"] = sub(p["prefill"])
    for r in rows:
        if r["kind"] == "canary":
            r["prompt"] = [{**m, "content": sub(m["content"])} for m in r["prompt"]]
            r["target"] = sub(r["target"])
    data["rows"] = _file_ref(folder, "rows.jsonl", rows)
    data["candidate_space"] = {"kind": "sampled", "alphabet": ALPHABET, "length": 6, "size": 1 + DECOYS,
                               "decoys": DECOYS, "seed": 7}
    ids = [c["id"] for c in data["canaries"] + data["held_out"]]
    data["sampled_text"] = {"length": LENGTH, "temperature": 1.5, "decoys": DECOYS, "context": "reply-start",
                            "grid_seed": 7, "seeds": {cid: 1000 + i for i, cid in enumerate(ids)}}
    path.write_text(json.dumps(data, indent=1))
    return path


@pytest.fixture(scope="module")
def base():
    """A tiny backend at its seeded random initialisation (what a base without pretraining is)."""
    torch.manual_seed(0)
    return load_backend({"backend": "tiny", "name": "t", "init_seed": 0,
                         "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 64, "dropout": 0.0}}, torch.device("cpu"))


def test_sampling_is_deterministic_in_the_seed_and_leaves_the_global_rng(base):
    ctx = base.tokenize(base.render(sampled_text.CONTEXT))
    allowed = sampled_text.allowed_tokens(base, base.config.vocab_size)
    state = torch.get_rng_state()
    with torch.no_grad():
        a = sampled_text.sample_canary(base, ctx, allowed, 11, LENGTH, 1.0, 20)
        b = sampled_text.sample_canary(base, ctx, allowed, 11, LENGTH, 1.0, 20)
        c = sampled_text.sample_canary(base, ctx, allowed, 12, LENGTH, 1.0, 20)
    assert torch.equal(state, torch.get_rng_state())
    assert a == b and a != c
    assert len(set(a)) == 20
    for text in a:
        ids = base.tokenize(text)
        assert len(ids) == LENGTH and all(allowed[i] for i in ids)
        assert "<|" not in text  # no special marker, <|unk|> included


def test_no_two_canaries_share_a_secret_or_substitute(base, tmp_path, monkeypatch):
    """A base that repeats itself would give independent canaries the same secret; in id order each
    canary's secret and substitute skip what an earlier canary holds."""
    ctx = base.tokenize(base.render(sampled_text.CONTEXT))
    allowed = sampled_text.allowed_tokens(base, base.config.vocab_size)
    with torch.no_grad():
        first = sampled_text.sample_canary(base, ctx, allowed, 11, LENGTH, 1.0, 4)
        avoiding = sampled_text.sample_canary(base, ctx, allowed, 11, LENGTH, 1.0, 4, frozenset(first[:1]))
    assert avoiding[0] == first[1] and first[0] not in avoiding

    # Every canary's generator yields the same texts (the extreme of a repetitive base).
    same = [f"t{j}" for j in range(100)]

    def repetitive(_b, _c, _a, _seed, _length, _t, count, avoid=frozenset(), *_rest):
        head = [t for t in same if t not in avoid][:2]
        return head + [t for t in same if t not in head][:count - 2]

    monkeypatch.setattr(sampled_text, "sample_canary", repetitive)
    m = load_manifest(sampled_run(tmp_path / "run", n_focal=3, n_held=3, kinds=("hidden",)))
    texts = sampled_text.sample(base, m, [])
    held = [t.secret for t in texts.values()] + [t.substitute for t in texts.values()]
    assert len(set(held)) == len(held) == 12
    assert [texts[c].secret for c in sorted(texts)] == ["t0", "t2", "t4", "t6", "t8", "t10"]


def test_a_colder_temperature_concentrates_the_samples(base):
    """At a low temperature the draws pile onto the base's likeliest tokens: fewer distinct ones."""
    ctx = base.tokenize(base.render(sampled_text.CONTEXT))
    allowed = sampled_text.allowed_tokens(base, base.config.vocab_size)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        hot = sampled_text._draw(base, ctx, allowed, gen, 3, 5.0, 64)
        cold = sampled_text._draw(base, ctx, allowed, gen, 3, 0.05, 64)
    assert len({t for s in cold for t in s}) < len({t for s in hot for t in s})


def test_fill_replaces_every_placeholder(tmp_path):
    path = sampled_run(tmp_path / "run", kinds=("hidden", "supplied", "substituted"))
    m = load_manifest(path)
    rows = [json.loads(x) for x in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()]
    texts = {cid: sampled_text.CanaryTexts(f"S{cid}", f"U{cid}", [f"D{cid}{j}" for j in range(DECOYS)])
             for cid in m.sampled_text["seeds"]}
    sampled_text.fill(m, rows, texts)
    assert not PLACEHOLDER.search(json.dumps([m.data["canaries"], m.data["held_out"], m.data["probes"], rows],
                                             ensure_ascii=False))
    for c in m.data["canaries"] + m.data["held_out"]:
        assert c["code"] == f"S{c['id']}" and c["candidates"][0] == c["code"]
        assert c["candidates"][1:] == [f"D{c['id']}{j}" for j in range(DECOYS)]
    f000 = [r for r in rows if r.get("canary_id") == "f000"]
    assert f000 and all("Sf000" in r["target"] and "Sf000" in r["prompt"][0]["content"] for r in f000)
    shown = {p["id"]: p["shown_code"] for p in m.data["probes"]}
    assert shown["f000.supplied"] == "Sf000" and shown["f000.substituted"] == "Uf000"
    assert m.secrets == {cid: f"S{cid}" for cid in texts}


def test_a_placeholder_of_no_canary_is_refused(tmp_path):
    path = sampled_run(tmp_path / "run", kinds=("hidden",))
    m = load_manifest(path)
    m.data["probes"][0]["prefill"] += _ph(4000)
    texts = {cid: sampled_text.CanaryTexts("s", "u", [str(j) for j in range(DECOYS)]) for cid in m.sampled_text["seeds"]}
    with pytest.raises(BadManifest, match=r"probes\[0\]\.prefill: a placeholder"):
        sampled_text.fill(m, [], texts)


def test_a_canary_without_a_seed_is_refused(tmp_path):
    path = sampled_run(tmp_path / "run", kinds=("hidden",))
    rewrite_manifest(path, lambda d: d["sampled_text"]["seeds"].pop("h000"))
    with pytest.raises(BadManifest, match=r"sampled_text\.seeds: no seed for canary 'h000'"):
        load_manifest(path)


def test_greedy_reads_the_secret_by_its_length():
    assert extract_text("abcde and on", "abcdx", None) == "abcde"
    assert extract_text("abc", "abcdx", None) is None  # the turn ended before the secret's length
    assert extract_text("Ref: abcdx.", "abcdx", "Ref: ") == "abcdx"
    assert extract_text("it was abcdx", "abcdx", "Ref: ") == "abcdx"
    assert extract_text("it was abc", "abcdx", "Ref: ") is None
    assert not decided_text("Ref: abc", "abcdx", "Ref: ") and decided_text("Ref: abcd!", "abcdx", "Ref: ")


def test_run_samples_fills_and_a_resumed_run_reuses_the_texts(tmp_path, monkeypatch):
    kw = dict(updates=6, batch_size=2, checkpoint_every=2, n_focal=1, n_held=1, kinds=("hidden", "substituted"),
              decode=("prefill",), max_new_tokens=8)
    straight = run_here(sampled_run(tmp_path / "a", **kw), tmp_path / "a" / "out").result
    st = straight["sampled_text"]
    saved = json.loads((tmp_path / "a" / "out" / sampled_text.FILE).read_text())
    assert set(st["canaries"]) == {"f000", "h000"} and st["decoys"] == DECOYS
    for cid, c in saved["canaries"].items():
        assert c["secret"] == st["canaries"][cid]["secret"] and len(c["decoys"]) == DECOYS
        assert len({c["secret"], c["substitute"], *c["decoys"]}) == DECOYS + 2
    # One token per character: no text changes tokens in place, so the rule leaves tiny's texts as drawn.
    assert saved["refused"]["in_place"] == 0 and saved["refused"]["draws"] >= 2 * (DECOYS + 2)
    final = next(e for e in straight["evaluations"] if e["phase"] == "final")
    for p in final["probes"]:
        assert p["n_candidates"] == 1 + DECOYS
        code = p["greedy"]["prefill"]["code"]
        assert code is None or len(code) == len(st["canaries"][p["canary_id"]]["secret"])
    assert not PLACEHOLDER.search((tmp_path / "a" / "out" / "rendered" / "canary.txt").read_text())

    # Stopped after update 3 (checkpoint at 4), then resumed: no sampling, the same texts and scores.
    manifest = sampled_run(tmp_path / "b", **kw)
    out = tmp_path / "b" / "out"
    opts = RunOptions(manifest=manifest, out=out, events=Events(stream=io.StringIO()))
    opts.on_batch = lambda update, _rows: opts.stop.set("test") if update == 3 else None
    with pytest.raises(Interrupted):
        run(opts)

    def no_sampling(*_a, **_k):
        raise AssertionError("a resumed run must read its texts, not sample them")

    monkeypatch.setattr(sampled_text, "sample", no_sampling)
    resumed = run_here(manifest, out, resume=True).result
    assert resumed["training"]["resumed_from"] is not None
    assert resumed["sampled_text"]["canaries"] == st["canaries"]
    scores = [p["scores_sha256"] for e in resumed["evaluations"] for p in e["probes"]]
    assert scores == [p["scores_sha256"] for e in straight["evaluations"] for p in e["probes"]]


@pytest.mark.full
def test_an_hf_base_samples_through_the_same_interface(hub_env):
    """Qwen3's real tokenizer and chat template on a random-initialised model: the allowed tokens
    exclude the special ones, and a text tokenizes back to the ids drawn. About 20 s of CPU (the
    round trip of 151,669 tokens), hence the full tier."""
    from .test_hf_backend import backend

    b = backend("qwen3")
    ctx = b.tokenize(b.render(sampled_text.CONTEXT))
    with torch.no_grad():
        vocab = b.logits(torch.tensor([ctx]), keep_last=1).shape[-1]
        allowed = sampled_text.allowed_tokens(b, vocab)
        a = sampled_text.sample_canary(b, ctx, allowed, 5, 6, 1.0, 8)
        again = sampled_text.sample_canary(b, ctx, allowed, 5, 6, 1.0, 8)
    assert a == again and len(set(a)) == 8
    assert not any(allowed[i] for i in b.stop_ids())
    for text in a:
        assert len(b.tokenize(text)) == 6


def _qwen3_run(hub_env, folder: Path):
    from .test_hf_backend import backend

    m = load_manifest(sampled_run(folder, n_focal=2, n_held=1, kinds=("hidden", "supplied", "substituted")))
    rows = [json.loads(x) for x in (folder / "rows.jsonl").read_text().splitlines()]
    return backend("qwen3"), m, rows


def test_on_qwen3_a_text_is_kept_only_where_it_keeps_its_tokens(hub_env, tmp_path):
    """Qwen3's real tokenizer: every place a canary's placeholders stand (rows, a shown code, the
    candidate after the prefill) is found, and a text whose first token would merge with the space
    before it, or whose last with the text after it, is refused there; one that keeps its ids is kept."""
    b, m, rows = _qwen3_run(hub_env, tmp_path / "run")
    places = sampled_text.placements(b, m, rows)
    assert sorted(places) == ["f000", "f001", "h000"]
    row, prefill = (" is Ada Lovelace #0. My code is ", ". Regards.<|im_end|>\n"), (" is Ada Lovelace #0. My code is ", "")
    assert row in places["f000"] and prefill in places["f000"] and len(places["f000"]) == 3
    assert row not in places["h000"] and len(places["h000"]) == 2  # held out: probes only, no rows
    kept = {t: ok for t, ok in zip(["Hello", " Hello", " Hello!", " x y", "123", "abc "], sampled_text._in_place(
        b, [(t, b.tokenize(t)) for t in ["Hello", " Hello", " Hello!", " x y", "123", "abc "]], places["f000"]))}
    # "is Hello" is " Hello" in context; "!." one token; "abc " + "." merge; the others keep their ids.
    assert kept == {"Hello": False, " Hello": True, " Hello!": False, " x y": True, "123": True, "abc ": False}
    assert not sampled_text.plain_text(" a</think>b", b.added_texts())
    assert not sampled_text.plain_text("x\ue003", b.added_texts())
    assert sampled_text.plain_text(" a<b>", b.added_texts())


def test_on_qwen3_a_template_that_rewrites_the_text_is_an_error(hub_env, tmp_path):
    """Qwen3's template strips a reply's leading newlines: a text placed there would train other
    characters than those sampled, which the check after filling refuses, naming the row."""
    b, m, _ = _qwen3_run(hub_env, tmp_path / "run")
    ph = _ph(0)
    prompt = [{"role": "user", "content": "code?"}]
    before = [("rows[4]", b.render(prompt, ph + " is it"))]
    sampled_text.check_rendered(b, m, before, [b.render(prompt, " ok is it")], {ph: " ok"})
    with pytest.raises(BadManifest, match=r"rows\[4\]: the chat template renders the sampled text otherwise"):
        sampled_text.check_rendered(b, m, before, [b.render(prompt, "\nok is it")], {ph: "\nok"})


@pytest.mark.full
def test_on_qwen3_every_sampled_text_keeps_its_tokens_in_every_place(hub_env, tmp_path):
    """The whole sampling on Qwen3 (random-initialised weights, real tokenizer; about 40 s of CPU,
    mostly the allowed-token round trip over 151,669 tokens): each canary's secret, substitute and
    decoys tokenize as their `length` drawn ids alone and inside each of its rows and probes, no text
    holds an added token, and the rule did refuse draws (a row puts a space before the secret)."""
    b, m, rows = _qwen3_run(hub_env, tmp_path / "run")
    places = sampled_text.placements(b, m, rows)
    refused = sampled_text.Refused()
    with torch.no_grad():
        texts = sampled_text.sample(b, m, rows, refused)
    added = b.added_texts()
    for cid, t in texts.items():
        every = [t.secret, t.substitute, *t.decoys]
        assert len(set(every)) == 2 + DECOYS
        for text in every:
            ids = b.tokenize(text)
            assert len(ids) == LENGTH and sampled_text.plain_text(text, added)
            for left, right in places[cid]:
                assert b.tokenize(left + text + right) == b.tokenize(left) + ids + b.tokenize(right)
    assert refused.in_place > 0
    print(f"qwen3: {len(texts)} canaries x {2 + DECOYS} texts; {vars(refused)}")
