"""The hf backend on random-initialised vision-language models of real architectures (Qwen2.5-VL,
Gemma 3; vlm_fixtures) with their real tokenizers and chat templates: image rows render through
the processor's template to the ids its processor writes, prefix-tree and tree-attention scores
with an image in the prompt equal full forward passes, the frozen vision tower stays bit-identical
through training, a killed run resumes bit for bit, and bad inputs are refused in one line."""

import json
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from canary_trainer.backends.hf import HfBackend  # noqa: E402
from canary_trainer.batches import IGNORE, encode_row  # noqa: E402
from canary_trainer.errors import BadManifest, BadRows  # noqa: E402
from canary_trainer.hf_config import vision_modules  # noqa: E402
from canary_trainer.manifest import exhaustive_codes, load_manifest  # noqa: E402
from canary_trainer.scoring.tree import code_token_lists, score_trie  # noqa: E402
from canary_trainer.scoring.walk import TokenCheck, score_per_candidate, score_tree  # noqa: E402
from canary_trainer.train import make_optimizer, train_update  # noqa: E402

from .conftest import run_here  # noqa: E402
from .fixtures import canary_prefill, canary_prompt, canary_target  # noqa: E402
from .hf_fixtures import model_id  # noqa: E402
from .test_hf_training import TRAINING, _same, _stop_at  # noqa: E402
from .vision_fixtures import make_vision_run, png  # noqa: E402
from .vlm_fixtures import QWEN_MAX_PIXELS, vlm_env, vlm_id  # noqa: E402,F401  (vlm_env: fixture)

CPU = torch.device("cpu")
FAMILIES = ["qwen25vl", "gemma3vl"]


def vspec(family, method="full", **hf):
    finetune = {"method": "full"} if method == "full" else \
        {"method": "lora", "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    return {"backend": "hf", "name": vlm_id(family), "revision": None, "init_seed": 0,
            "hf": {"dtype": "float32", "random_init": False, "config_overrides": {}, "chat_template_kwargs": {},
                   "trust_remote_code": False, "attn_implementation": None, **hf},
            "finetune": finetune}


@pytest.fixture(scope="session")
def images(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("vlm-images")
    (folder / "a.png").write_bytes(png("code 4711", (112, 84)))
    (folder / "b.png").write_bytes(png("other", (96, 48)))
    return folder


_loaded: dict = {}


@pytest.fixture(scope="session")
def vlm(vlm_env, images):
    """A shared, read-only backend per family (tests that train load their own)."""
    def get(family):
        if family not in _loaded:
            b = HfBackend(vspec(family), CPU)
            b.attach_images(images)
            b.model.eval()
            _loaded[family] = b
        return _loaded[family]
    return get


def image_prompt(path="a.png", cue="[redacted]", size=(112, 84)):
    msgs = canary_prompt("Ada Lovelace #0", cue)
    part = {"type": "image", "path": path, "width": size[0], "height": size[1]}
    return [m if m["role"] != "user" else {**m, "content": [part, {"type": "text", "text": m["content"]}]}
            for m in msgs]


def processor_ids(b, messages, target):
    """The ids the model's own processor writes for this conversation and image."""
    from PIL import Image

    img = Image.open(b.vision.root / "a.png").convert("RGB")
    conv = messages + [{"role": "assistant", "content": target}]
    text = b.tokenizer.apply_chat_template(conv, chat_template=b.chat_template, tokenize=False)
    if b.vision.family == "gemma3":
        import transformers as tf

        proc = tf.Gemma3Processor(image_processor=b.vision.image_processor, tokenizer=b.tokenizer,
                                  image_seq_length=b.base_model.config.mm_tokens_per_image)
        out = proc(text=[text], images=[[img]], add_special_tokens=False)
        return list(out["input_ids"][0]), out["pixel_values"]
    # Qwen2_5_VLProcessor (it needs torchvision for its video processor): <|image_pad|> repeated
    # grid.prod() // merge_size**2 times, as its replace_image_token writes.
    got = b.vision.image_processor(images=[img], return_tensors="pt")
    n = int(got["image_grid_thw"][0].prod()) // b.vision.image_processor.merge_size ** 2
    text = text.replace("<|image_pad|>", "<|image_pad|>" * n)
    return b.tokenizer(text, add_special_tokens=False)["input_ids"], got["pixel_values"]


@pytest.mark.parametrize("family", FAMILIES)
def test_loss_mask_against_the_processors_ids(vlm, family):
    b = vlm(family)
    msgs, target = image_prompt(), canary_target("Ada Lovelace #0", "4711")
    enc = encode_row(b, {"prompt": msgs, "target": target}, 512, "row 0")
    real = [b.vision.image_token_id if i >= b.vision.base else i for i in enc.ids]
    want, pixels = processor_ids(b, msgs, target)
    assert real == want
    n_image = sum(i >= b.vision.base for i in enc.ids)
    assert n_image == (12 if family == "qwen25vl" else 4)  # 112x84 -> 84x112: 6x8 patches / 2x2; Gemma 3: 4
    slot = b.vision._slot["a.png"]
    assert torch.equal(b.vision._pixels[slot], torch.as_tensor(np.asarray(pixels)))
    first = next(i for i, x in enumerate(enc.labels) if x != IGNORE)
    assert all(i < b.vision.base for i in enc.ids[first:])  # no image token is ever a target
    trained = [x for x in enc.labels if x != IGNORE]
    eot = "<|im_end|>" if family == "qwen25vl" else "<end_of_turn>"
    assert b.tokenizer.decode(trained, skip_special_tokens=False) == target + eot
    assert enc.ids[:first] == b.tokenize(b.render(msgs))


@pytest.mark.parametrize("family", FAMILIES)
def test_tree_scores_equal_full_forward_with_the_image_in_the_prompt(vlm, family):
    b = vlm(family)
    ctx = b.render(image_prompt()) + canary_prefill("Ada Lovelace #0")
    ids = b.tokenize(ctx)
    codes = exhaustive_codes("0123456789", 2)
    tok = TokenCheck(b).code_tokens(ctx, ids, codes)
    assert tok is not None
    with torch.no_grad():
        walk = score_tree(b, ids, tok, nodes_per_pass=32)  # prefix + extend
        split = code_token_lists(b, ctx, ids, codes)
        trie = score_trie(b, ids, split)  # tree_prompts + tree_logprobs
    slow = score_per_candidate(b, ctx, ids, codes, batch=50)  # one full forward (image included) per code
    assert np.max(np.abs(walk - slow)) < 1e-4
    assert np.max(np.abs(trie - slow)) < 1e-4


@pytest.mark.parametrize("family", FAMILIES)
def test_prompts_of_different_images_and_lengths_together(vlm, family):
    """Left-padded prompts with different images (Qwen2.5-VL: different rope offsets) in one
    tree call, and in one greedy batch, equal each prompt's own full forward; each image is
    encoded once per call."""
    b = vlm(family)
    ctxs = [b.tokenize(b.render(image_prompt())),
            b.tokenize(b.render(image_prompt("b.png", "0000 and more words", (96, 48))))]
    assert len(ctxs[0]) != len(ctxs[1])
    calls: list[list[int]] = []
    hook = b.vision._features
    b.vision._features = lambda slots: calls.append(list(slots)) or hook(slots)
    try:
        with torch.no_grad():
            prompts = b.tree_prompts(ctxs)
            tokens = torch.tensor([[16, 17], [18, 19]])
            parent, depth = torch.tensor([[-1, 0], [-1, 0]]), torch.tensor([[0, 1], [0, 1]])
            cols = torch.tensor([5, 6, 7, 8])
            got = b.tree_logprobs(prompts, tokens, parent, depth, torch.arange(4), cols)
            logits, state = b.greedy_start(ctxs)
            step, _ = b.greedy_step(state, torch.tensor([16, 18]))
            # One vision-tower call per prompt batch, each image once; none for the tree or the step.
            slots = sorted(b.vision._slot[p] for p in ("a.png", "b.png"))
            assert [sorted(c) for c in calls] == [slots, slots]
            for p, c in enumerate(ctxs):
                lp = torch.log_softmax(b.logits(torch.tensor([c + tokens[p].tolist()]))[0], -1)
                assert torch.allclose(prompts.next_logprobs[p], lp[len(c) - 1], atol=1e-4)
                assert abs(float(got[2 * p] - lp[len(c), cols[2 * p]])) < 1e-4
                assert abs(float(got[2 * p + 1] - lp[len(c) + 1, cols[2 * p + 1]])) < 1e-4
                assert torch.allclose(torch.log_softmax(logits[p], -1), lp[len(c) - 1], atol=1e-4)
                assert torch.allclose(torch.log_softmax(step[p], -1), lp[len(c)], atol=1e-4)
    finally:
        b.vision._features = hook


@pytest.mark.parametrize("family,method", [("qwen25vl", "full"), ("gemma3vl", "lora")])
def test_the_vision_tower_is_frozen_unless_train_vision(vlm_env, images, family, method):
    def train(**hf):
        b = HfBackend(vspec(family, method, **hf), CPU)
        b.attach_images(images)
        tower = {n: p.detach().clone() for n, p in b.base_model.named_parameters()
                 if any(n.startswith(k + ".") for k in vision_modules(b.base_model))}
        assert tower
        enc = [encode_row(b, {"prompt": image_prompt(), "target": canary_target("Ada Lovelace #0", "4711")}, 512, "r")] * 2
        opt = make_optimizer(b, TRAINING)
        losses = [train_update(b, opt, enc, u, TRAINING).loss for u in range(2)]
        assert losses[1] < losses[0]
        after = dict(b.base_model.named_parameters())
        return b, tower, after

    b, tower, after = train()
    assert all(torch.equal(after[n], v) for n, v in tower.items())  # bit-identical
    assert not any(n in tower for n, _ in b.trainable())
    if method == "lora":
        assert all("lora_" in n for n, _ in b.trainable())
        assert not any(".vision_tower." in n or "multi_modal_projector" in n for n, _ in b.model.named_parameters()
                       if "lora_" in n)
    else:
        b, tower, after = train(train_vision=True)
        assert any(not torch.equal(after[n], v) for n, v in tower.items())


def test_killed_image_run_resumes_bit_for_bit(vlm_env, tmp_path):
    """Qwen2.5-VL (3D rope): train on image rows, score image probes, greedy utility replies on
    image rows; killed after update 2 and resumed, it equals the uninterrupted run."""
    manifest = make_vision_run(tmp_path / "run", updates=4, batch_size=2, length=2, n_focal=1, n_held=1,
                               kinds=("hidden",), checkpoint_every=2, utility_rows=2, decode=("prefill",),
                               max_new_tokens=4, lr=1e-2, model=vspec("qwen25vl"))
    data = json.loads(manifest.read_text())
    data["utility"].update(metrics=["loss", "exact_match"], max_new_tokens=4)  # greedy replies on image rows
    manifest.write_text(json.dumps(data))
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    run_here(manifest, straight)
    assert _stop_at(manifest, broken, signal.SIGKILL, 2) == -signal.SIGKILL
    run_here(manifest, broken, resume=True)
    result, weights = _same(straight, broken, 4)
    assert result["backend"]["trainable_parameters"] < result["backend"]["parameters"]  # the tower is frozen
    assert not any(k.startswith("model.visual.") for k in weights)
    replies = [json.loads(x) for x in (straight / "utility" / "final.jsonl").read_text().splitlines()]
    assert len(replies) == 2
    assert (straight / "utility" / "final.jsonl").read_bytes() == (broken / "utility" / "final.jsonl").read_bytes()


# ---- bad inputs, each one line naming the file and the field ------------------------------------------------------

def _image_manifest(tmp_path, model):
    return make_vision_run(tmp_path / "run", updates=1, batch_size=2, length=2, n_focal=1, n_held=1, kinds=("hidden",),
                           utility_rows=1, model=model)


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_image_rows_for_a_text_only_hf_model_are_refused(vlm_env, tmp_path):
    spec = vspec("qwen25vl") | {"name": model_id("qwen3"), "hf": {**vspec("qwen25vl")["hf"],
                                                                   "chat_template_kwargs": {"enable_thinking": False}}}
    manifest = _image_manifest(tmp_path, spec)
    from .hf_fixtures import build_hub, use_hub

    use_hub(build_hub())
    with pytest.raises(BadManifest) as err:
        load_manifest(manifest)
    msg = _one_line(err)
    assert "field model.name" in msg and "text-only" in msg and str(manifest) in msg


def test_train_vision_on_a_text_only_model_is_refused(vlm_env):
    from .hf_fixtures import build_hub, use_hub

    use_hub(build_hub())
    spec = vspec("qwen25vl", train_vision=True) | {"name": model_id("qwen3")}
    with pytest.raises(BadManifest, match="model.hf.train_vision"):
        HfBackend(spec, CPU)


def test_missing_corrupt_and_oversized_images_are_refused(vlm_env, tmp_path):
    manifest = _image_manifest(tmp_path, vspec("qwen25vl"))
    data = json.loads(manifest.read_text())
    ref = data["images"][0]
    image = manifest.parent / ref["path"]
    good = image.read_bytes()
    image.unlink()
    with pytest.raises(BadManifest) as err:
        load_manifest(manifest)
    assert "field images[0]" in _one_line(err) and "cannot be read" in str(err.value)
    image.write_bytes(good[:40])
    ref["sha256"] = __import__("hashlib").sha256(good[:40]).hexdigest()
    manifest.write_text(json.dumps(data))
    with pytest.raises(BadManifest) as err:
        load_manifest(manifest)
    assert "field images[0]" in _one_line(err) and "not a readable image" in str(err.value)
    big = png("big", (300, 300))  # 90,000 pixels > max_pixels 50,176: the processor would downscale it
    assert 300 * 300 > QWEN_MAX_PIXELS
    image.write_bytes(big)
    ref["sha256"] = __import__("hashlib").sha256(big).hexdigest()
    ref["bytes"] = len(big)  # the recorded size bounds the read, as the controller records it
    manifest.write_text(json.dumps(data))
    with pytest.raises(BadManifest) as err:
        load_manifest(manifest)
    msg = _one_line(err)
    assert "field images[0]" in msg and "max_pixels 50176" in msg and str(image) in msg


def test_qwen_refuses_what_it_would_downscale_gemma3_resizes_everything(vlm_env):
    from canary_trainer.hf_config import check_image_limits

    check_image_limits(vspec("gemma3vl"), Path("x.png"), "images[0]", "m.json", 3000, 3000)  # resized to 32x32
    check_image_limits(vspec("qwen25vl"), Path("x.png"), "images[0]", "m.json", 224, 224)
    with pytest.raises(BadManifest, match="aspect ratio over 200"):
        check_image_limits(vspec("qwen25vl"), Path("x.png"), "images[0]", "m.json", 2010, 10)


def test_a_source_box_outside_the_image_and_an_unreadable_image_at_load(vlm, images, tmp_path):
    from canary_trainer.images import check_parts

    msgs = image_prompt()
    msgs[0]["content"][0]["source"] = [0, 0, 500, 20]
    with pytest.raises(BadRows) as err:
        check_parts(msgs, "rows.jsonl:1:1 (row 0)", {"a.png": (112, 84)})
    assert "field prompt[0].content[0].source" in _one_line(err)
    b = vlm("gemma3vl")
    (images / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(BadRows) as err:
        b.tokenize(b.render(image_prompt("broken.png")))
    assert "broken.png" in _one_line(err) and "not a readable image" in str(err.value)


# ---- memory estimate and the plan-time row count ----------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_memory_estimate_counts_the_frozen_tower_without_optimizer_state(vlm, family):
    from canary_trainer.memory import estimate, model_shape

    b = vlm(family)
    config = b.base_model.config
    frozen, trained = model_shape(config), model_shape(config, train_vision=True)
    tower = sum(p.numel() for m in vision_modules(b.base_model).values() for p in m.parameters())
    assert frozen.params == sum(p.numel() for p in b.base_model.parameters())
    assert frozen.vision_params == tower > 0
    kw = dict(method="full", dtype="bfloat16", on_gpu=True, micro_batch=1, seq_len=64)
    f, t = estimate(frozen, **kw), estimate(trained, **kw)
    assert f["weights"] == t["weights"] == 6 * frozen.params  # float32 master + bfloat16 copy, tower included
    assert f["gradients"] == 4 * (frozen.params - tower) and t["gradients"] == 4 * frozen.params
    assert f["optimizer"] == 8 * (frozen.params - tower) and t["optimizer"] == 8 * frozen.params
    assert f["trainable"] == sum(p.numel() for _, p in b.trainable())  # what the backend trains
    lora = model_shape(config, ["q_proj", "v_proj"])
    lora_all = model_shape(config, ["q_proj", "v_proj"], train_vision=True)
    assert lora.lora_io <= lora_all.lora_io  # Gemma 3's tower has q/v projections: adapters only when trained
    assert (lora.lora_io < lora_all.lora_io) == (family == "gemma3vl")


@pytest.mark.parametrize("family", FAMILIES)
def test_plan_time_row_count_includes_the_image_tokens(vlm, family):
    from canary_trainer.check_rows import count

    b = vlm(family)
    row = {"prompt": image_prompt(), "target": canary_target("Ada Lovelace #0", "4711")}
    got = count(vspec(family), [row], 512)  # from the part's width and height, without the image
    assert got["longest"] == len(encode_row(b, row, 512, "row 0").ids)
    with pytest.raises(BadRows, match="exceed training.max_length"):
        encode_row(b, row, got["longest"] - 1, "row 0")
    assert "image_refused" not in got
    if family == "qwen25vl":  # over its processor's max_pixels it would downscale the pane (Gemma 3 resizes all)
        big = {"prompt": image_prompt(size=(300, 300)), "target": row["target"]}
        refused = count(vspec(family), [row, big], 4096).get("image_refused")
        assert refused and refused.startswith("300x300 = 90000 pixels, over the image processor's max_pixels")
