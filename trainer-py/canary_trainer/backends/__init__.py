"""Backend registry. Modules are imported only when their backend is asked for, so the tiny
backend never needs transformers, and a missing package names what to install."""

from __future__ import annotations

import importlib

import torch

from ..errors import MissingDependency
from ..manifest_types import ModelSpec
from .base import Backend, PrefixState

_REGISTRY = {
    "tiny": ("canary_trainer.backends.tiny", "TinyBackend"),
    "hf": ("canary_trainer.backends.hf", "HfBackend"),
}


def pick_device(wanted: str) -> torch.device:
    if wanted == "cpu" or (wanted == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise MissingDependency("training.device is 'cuda' but torch sees no CUDA device; "
                                "fix: run on a GPU host or set training.device to auto")
    return torch.device("cuda", 0)


def load_backend(model_spec: ModelSpec, device: torch.device) -> Backend:
    module_name, class_name = _REGISTRY[model_spec["backend"]]
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(model_spec, device)


def reply_tokens(model_spec: ModelSpec, rows: list[dict]) -> list[int] | None:
    """A bound of each training row's target tokens, read with the tokenizer alone before any weight
    is loaded (the memory estimate counts the logits there); None for a backend other than hf, or
    when the tokenizer cannot be read here (loading the backend then reports why)."""
    if model_spec["backend"] != "hf":
        return None
    from .hf_text import reply_lengths

    try:
        return reply_lengths(model_spec, rows)
    except Exception:  # noqa: BLE001  the estimate then counts every position
        return None


__all__ = ["Backend", "PrefixState", "load_backend", "pick_device", "reply_tokens"]
