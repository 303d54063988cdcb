"""Loading a transformers model for the hf backend: offline only (local folder or the Hugging Face
cache), each failure named for what it is (not downloaded vs. an architecture this transformers
release does not know), and weights placed directly on the device in their final dtype."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import torch

from ..errors import BadManifest, MissingDependency, MissingModel
from ..hf_config import local_config

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


# Tokenizers read while a `tokenizers_read_once()` block is open, by (name, revision, trust_remote_code).
_tokenizers: dict[tuple, Any] | None = None


@contextmanager
def tokenizers_read_once() -> Iterator[None]:
    """Inside the block a model's tokenizer is read from disk once: a run's memory estimate (reply
    lengths) and its backend load the same files, and the backends never change a tokenizer. Each
    run opens its own block, so a tokenizer replaced on disk is read anew by the next run."""
    global _tokenizers
    saved, _tokenizers = _tokenizers, {}
    try:
        yield
    finally:
        _tokenizers = saved


def import_transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise MissingDependency(f"the hf backend needs transformers ({exc}); fix: pip install transformers "
                                "(and peft for LoRA) in the trainer's Python, or use the tiny backend") from exc
    return transformers


def check_precision(hf: dict) -> None:
    if hf["dtype"] == "float16":
        raise BadManifest("model.hf.dtype: float16 training needs a gradient scaler, which this trainer does not "
                          "use (small gradients underflow to zero and the run silently stops learning); fix: use "
                          "bfloat16 (same memory, float32's exponent range; any GPU since Ampere) or float32")


def check_architecture(tf: Any, name: str, revision: str | None, trust_remote_code: bool) -> None:
    """A model that is present but of an architecture this transformers release cannot build is a
    dependency problem, not a missing download."""
    config = local_config(name, revision)
    if not config or trust_remote_code and config.get("auto_map"):
        return
    model_type = config.get("model_type")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type and model_type not in CONFIG_MAPPING:
        raise MissingDependency(f"model {name!r} is present, but this transformers version ({tf.__version__}) cannot "
                                f"load model_type {model_type!r}; fix: upgrade transformers in the trainer's Python "
                                "(the pinned trainer-py/requirements.lock) to a release that supports it, or "
                                "choose another model")


def load_tokenizer_and_config(tf: Any, spec: Mapping[str, Any], load_kw: dict) -> tuple[Any, Any]:
    name = spec["name"]
    check_architecture(tf, name, spec.get("revision"), spec["hf"]["trust_remote_code"])
    try:
        key = (name, load_kw.get("revision"), load_kw.get("trust_remote_code"), load_kw.get("local_files_only"))
        tokenizer = _tokenizers.get(key) if _tokenizers is not None else None
        if tokenizer is None:
            tokenizer = tf.AutoTokenizer.from_pretrained(name, **load_kw)
            if _tokenizers is not None:
                _tokenizers[key] = tokenizer
        config = tf.AutoConfig.from_pretrained(name, **load_kw)
    except (OSError, ValueError) as exc:
        revision = spec.get("revision")
        fetch = f"canary-audit models fetch {name}" + (f" --revision {revision}" if revision else "")
        raise MissingModel(f"model {name!r} (revision {revision}) is neither a local folder "
                           f"nor in the Hugging Face cache: {str(exc).splitlines()[0]}; fix: on this host, "
                           f"with HF_HOME as the worker's, run `{fetch}`") from exc
    return tokenizer, config


def load_weights(tf: Any, spec: dict, config: Any, device: torch.device, dtype: torch.dtype, extra: dict,
                 vision: bool = False) -> Any:
    """The causal LM on `device` in `dtype`, without an intermediate float32 copy on the CPU:
    pretrained weights stream from the checkpoint files straight onto the device in `dtype`
    (device_map), random weights are allocated there (torch's device context)."""
    hf = spec["hf"]
    # A vision-language model (a config with a vision tower) loads as an image-text-to-text model.
    auto = tf.AutoModelForImageTextToText if vision else tf.AutoModelForCausalLM
    if hf["random_init"]:
        for key, value in hf["config_overrides"].items():
            setattr(config, key, value)
        torch.manual_seed(spec["init_seed"])
        with torch.device(device):
            model = auto.from_config(config, trust_remote_code=hf["trust_remote_code"], **extra)
        return model.to(dtype=dtype)
    dtype_kw = "dtype" if version_at_least(tf.__version__, (4, 56)) else "torch_dtype"
    place = {"device_map": {"": str(device)}, "low_cpu_mem_usage": True}
    try:
        import accelerate  # noqa: F401  (device_map needs it)
    except ImportError:
        place = {"low_cpu_mem_usage": False}
    try:
        model = auto.from_pretrained(
            spec["name"], revision=spec.get("revision"), local_files_only=True,
            trust_remote_code=hf["trust_remote_code"], **extra, **place, **{dtype_kw: dtype})
    except OSError as exc:
        raise MissingModel(f"weights of {spec['name']!r} are not available locally: "
                           f"{str(exc).splitlines()[0]}; fix: download the model first") from exc
    return model if getattr(model, "hf_device_map", None) else model.to(device)


def version_at_least(version: str, wanted: tuple[int, int]) -> bool:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts) >= wanted
