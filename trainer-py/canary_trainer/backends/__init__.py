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


__all__ = ["Backend", "PrefixState", "load_backend", "pick_device"]
