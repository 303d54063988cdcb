"""The tiny VLM: image parts read through the vision stem, scored and decoded like text, and every
bad image input refused in one line naming the file and the field."""

import json
import signal

import numpy as np
import pytest
import torch

from canary_trainer.backends.tiny import TinyBackend
from canary_trainer.base_model import cache_key, freeze_for_finetuning, frozen_in_finetuning, key_material
from canary_trainer.batches import encode_row
from canary_trainer.checkpoint import checkpoint_dir
from canary_trainer.errors import BadManifest, BadRows
from canary_trainer.manifest import exhaustive_codes, load_manifest
from canary_trainer.run import RunOptions, run
from canary_trainer.scoring.walk import TokenCheck, score_per_candidate, score_tree
from canary_trainer.train import make_optimizer, train_update

from .conftest import run_here, trainer_env
from .fixtures import make_run, rewrite_manifest
from .test_resume import _same_outputs, _stop_at_checkpoint
from .vision_fixtures import SIZE, SOURCE, TINY_VLM, make_vision_run, png

SPEC = {"backend": "tiny", "name": "t", "init_seed": 3, "tiny": {**TINY_VLM, "dropout": 0.0}}


def _backend(folder):
    b = TinyBackend(SPEC, torch.device("cpu"))
    b.attach_images(folder)
    b.model.eval()
    return b


def _probe_context(tmp_path):
    manifest = make_vision_run(tmp_path / "run")
    m = load_manifest(manifest)
    probe = m.data["probes"][0]
    return m, probe


def test_image_tokens_come_from_the_pixels(tmp_path):
    m, probe = _probe_context(tmp_path)
    b = _backend(m.folder)
    text = b.render(probe["prompt"])
    assert "<|image:images/" in text and "#" + ",".join(map(str, SOURCE)) in text
    ids = b.tokenize(text)
    per = TINY_VLM["vision"]["rows"] * TINY_VLM["vision"]["cols"]
    image_ids = [i for i in ids if i >= b.tokenizer.vocab_size]
    assert len(image_ids) == per
    with torch.no_grad():
        before = b.logits(torch.tensor([ids]))[0, -1].clone()
        b._pixels[0] = 1.0 - b._pixels[0]  # other pixels, same tokens
        after = b.logits(torch.tensor([ids]))[0, -1]
    assert not torch.allclose(before, after)


def test_tree_scores_equal_per_candidate_with_the_image_in_the_prompt(tmp_path):
    m, probe = _probe_context(tmp_path)
    b = _backend(m.folder)
    ctx = b.render(probe["prompt"]) + probe["prefill"]
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 3)
    tok = TokenCheck(b).code_tokens(ctx, ids, codes)
    assert tok is not None and tok.shape == (1000, 3)
    fast = score_tree(b, ids, tok, nodes_per_pass=64)
    slow = score_per_candidate(b, ctx, ids, codes, batch=250)
    assert np.max(np.abs(fast - slow)) < 1e-4
    assert np.std(fast) > 0


def test_a_vision_run_trains_scores_and_decodes(tmp_path):
    manifest = make_vision_run(tmp_path / "run", updates=6, batch_size=2, length=3, kinds=("hidden", "substituted"),
                               decode=("prefill",), base_model=True)
    result = run(RunOptions(manifest=manifest, out=tmp_path / "out"))
    assert [e["phase"] for e in result["evaluations"]] == ["base", "final"]
    assert result["rendered"]["canary"] is not None
    rendered = (tmp_path / "out" / result["rendered"]["canary"]).read_text()
    assert "<|image:images/" in rendered
    assert all(p["n_candidates"] == 1000 for p in result["evaluations"][-1]["probes"])


def test_kill_9_then_resume_is_bit_identical(tmp_path):
    manifest = make_vision_run(tmp_path / "run", updates=30, batch_size=2, length=3, checkpoint_every=5, n_focal=1,
                               n_held=1, kinds=("hidden", "supplied"), base_model=True, decode=("prefill",))
    straight = tmp_path / "straight"
    run_here(manifest, straight, CANARY_TRAINER_CACHE=str(tmp_path / "cache-a"))
    broken = tmp_path / "broken"
    rc, _ = _stop_at_checkpoint(manifest, broken, signal.SIGKILL, 10,
                                env=trainer_env(CANARY_TRAINER_CACHE=str(tmp_path / "cache-b")))
    assert rc == -signal.SIGKILL
    resumed = run_here(manifest, broken, resume=True, CANARY_TRAINER_CACHE=str(tmp_path / "cache-b"))
    assert resumed.of("started")[0]["resumed_from"] is not None
    _same_outputs(straight, broken)


# --- bad inputs: one line naming the file and the field ---------------------------------------------

def _first_image(manifest):
    data = json.loads(manifest.read_text())
    return manifest.parent / data["images"][0]["path"], data


def _relist(manifest, file, raw):
    """Replace one image's bytes and keep its manifest entry (sha256, bytes) consistent."""
    import hashlib

    file.write_bytes(raw)

    def edit(m):
        for ref in m["images"]:
            if manifest.parent / ref["path"] == file:
                ref["sha256"], ref["bytes"] = hashlib.sha256(raw).hexdigest(), len(raw)
    rewrite_manifest(manifest, edit)


def test_a_missing_image_is_named(tmp_path):
    manifest = make_vision_run(tmp_path / "run")
    file, _ = _first_image(manifest)
    file.unlink()
    with pytest.raises(BadManifest, match=r"field images\[0\]: .*images/[0-9a-f]{64}\.png cannot be read"):
        load_manifest(manifest)


def test_a_corrupt_image_is_named(tmp_path):
    manifest = make_vision_run(tmp_path / "run")
    file, _ = _first_image(manifest)
    _relist(manifest, file, b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    with pytest.raises(BadManifest, match=r"field images\[0\]: .*\.png is not a readable image"):
        load_manifest(manifest)


def test_a_truncated_image_is_named_when_read(tmp_path):
    manifest = make_vision_run(tmp_path / "run")
    file, _ = _first_image(manifest)
    raw = file.read_bytes()
    idat = raw.index(b"IDAT")
    # the pixel data cut short, the chunk's length and checksum kept consistent: only decoding sees it
    import struct
    import zlib
    body = raw[idat + 4: idat + 4 + struct.unpack(">I", raw[idat - 4: idat])[0]][:6]
    chunk = struct.pack(">I", len(body)) + b"IDAT" + body + struct.pack(">I", zlib.crc32(b"IDAT" + body))
    end = idat + 4 + struct.unpack(">I", raw[idat - 4: idat])[0] + 4
    _relist(manifest, file, raw[: idat - 4] + chunk + raw[end:])
    with pytest.raises(BadRows, match=r"images/[0-9a-f]{64}\.png: not a readable image"):
        run(RunOptions(manifest=manifest, out=tmp_path / "out"))


def test_an_image_over_the_pixel_limit_is_named(tmp_path):
    manifest = make_vision_run(tmp_path / "run")
    file, _ = _first_image(manifest)
    _relist(manifest, file, png("big", (400, 300)))
    with pytest.raises(BadManifest, match=r"field images\[0\]: .* is 400x300 = 120000 pixels, over the model's "
                                          r"model\.tiny\.vision\.max_pixels 40000"):
        load_manifest(manifest)


def test_image_rows_for_a_text_only_model_are_refused(tmp_path):
    manifest = make_vision_run(tmp_path / "run")
    rewrite_manifest(manifest, lambda m: m["model"]["tiny"].pop("vision"))
    with pytest.raises(BadManifest, match=r"field model\.backend: tiny reads text only \(no model\.tiny\.vision\), "
                                          r"but the rows show \d+ images"):
        load_manifest(manifest)


def test_a_source_box_outside_the_image_is_named(tmp_path):
    manifest = make_vision_run(tmp_path / "run", source=[8, 8, SIZE[0] + 1, 40])
    with pytest.raises(BadRows, match=r"probes\[0\]: field prompt\[0\]\.content\[0\]\.source: \[8, 8, 97, 40\] lies "
                                      r"outside the 96x48 image"):
        load_manifest(manifest)


def test_a_source_box_outside_the_image_in_a_row_is_named(tmp_path):
    manifest = make_vision_run(tmp_path / "run")
    rows = manifest.parent / "rows.jsonl"
    lines = rows.read_text().splitlines()
    n = next(i for i, x in enumerate(lines) if '"source"' in x)
    lines[n] = lines[n].replace('"source": [8, 8, 88, 40]', '"source": [90, 8, 88, 40]')
    raw = ("\n".join(lines) + "\n").encode()
    rows.write_bytes(raw)
    import hashlib
    rewrite_manifest(manifest, lambda m: m["rows"].update(sha256=hashlib.sha256(raw).hexdigest()))
    with pytest.raises(BadRows, match=rf"rows\.jsonl:{n + 1}:1 \(row {n}\): field prompt\[0\]\.content\[0\]\.source: "
                                      r"\[90, 8, 88, 40\] lies outside the 96x48 image or is empty"):
        run(RunOptions(manifest=manifest, out=tmp_path / "out"))


def test_text_runs_are_unchanged_by_the_vision_code(tmp_path):
    """A text model has no vision modules: its parameters are the decoder's alone."""
    b = TinyBackend({"backend": "tiny", "name": "t", "init_seed": 0,
                     "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 64, "dropout": 0.0}},
                    torch.device("cpu"))
    assert b.model.vision is None and not any(n.startswith("vision") for n in b.model.state_dict())
    assert load_manifest(make_run(tmp_path / "text")).image_sizes == {}


# --- a frozen vision stem (model.tiny.vision.freeze) -----------------------------------------------

FROZEN = {**TINY_VLM, "vision": {**TINY_VLM["vision"], "freeze": True}}
PRETRAIN = {"updates": 6, "batch_size": 2, "lr": 3e-3, "schedule": {"kind": "constant", "warmup_updates": 0}}


def _frozen_run(tmp_path, tiny=FROZEN):
    return make_vision_run(tmp_path / "run", updates=30, batch_size=2, length=3, checkpoint_every=5, n_focal=1,
                           n_held=1, kinds=("hidden", "supplied"), base_model=True, decode=("prefill",),
                           tiny=tiny, pretrain=PRETRAIN)


def test_a_frozen_stem_is_not_fine_tuned_and_shares_the_trained_stems_base(tmp_path):
    frozen = load_manifest(_frozen_run(tmp_path / "f"))
    trained = load_manifest(_frozen_run(tmp_path / "t", tiny=TINY_VLM))
    assert "freeze" not in trained.model["tiny"]["vision"]  # absent is false
    assert frozen_in_finetuning(frozen) and not frozen_in_finetuning(trained)
    cpu = torch.device("cpu")
    assert cache_key(key_material(frozen, cpu, 1)) == cache_key(key_material(trained, cpu, 1))
    b = TinyBackend(frozen.model, cpu)
    b.attach_images(frozen.folder)
    stem = {n: p.detach().clone() for n, p in b.model.named_parameters() if n.startswith("vision.")}
    rest = {n: p.detach().clone() for n, p in b.model.named_parameters() if not n.startswith("vision.")}
    assert freeze_for_finetuning(b, frozen) == sum(p.numel() for p in stem.values()) > 0
    assert {n for n, _ in b.trainable()} == set(rest)
    rows = [json.loads(x) for x in (frozen.folder / "rows.jsonl").read_text().splitlines()]
    encoded = [encode_row(b, r, 256, "row") for r in rows]
    optimizer = make_optimizer(b, frozen.training)
    for update in range(3):
        train_update(b, optimizer, encoded, update, frozen.training)
    now = dict(b.model.named_parameters())
    assert all(torch.equal(now[n], p) for n, p in stem.items())
    assert any(not torch.equal(now[n], p) for n, p in rest.items())
    assert freeze_for_finetuning(TinyBackend(trained.model, cpu), trained) == 0


def test_a_frozen_stem_run_resumes_bit_identical_with_the_stem_from_the_base(tmp_path):
    """The checkpoint holds the trained weights only; the resumed run takes the stem from the base
    again (here rebuilt into an empty cache), so it ends as the uninterrupted run does."""
    manifest = _frozen_run(tmp_path)
    straight = tmp_path / "straight"
    result = run_here(manifest, straight, CANARY_TRAINER_CACHE=str(tmp_path / "cache-a")).result
    described = result["backend"]
    assert described["trainable_parameters"] < described["parameters"]
    assert result["backend"]["base_model"]["kind"] == "pretrained"
    assert not any(k.startswith("vision.") for k in torch.load(checkpoint_dir(straight, 30) / "weights.pt"))
    broken = tmp_path / "broken"
    rc, _ = _stop_at_checkpoint(manifest, broken, signal.SIGKILL, 10,
                                env=trainer_env(CANARY_TRAINER_CACHE=str(tmp_path / "cache-b")))
    assert rc == -signal.SIGKILL
    resumed = run_here(manifest, broken, resume=True, CANARY_TRAINER_CACHE=str(tmp_path / "cache-c"))
    assert resumed.of("started")[0]["resumed_from"] == 10
    _same_outputs(straight, broken)
