"""An hf model's json files (config.json, preprocessor_config.json) read without transformers or torch,
from a local folder or a cached snapshot: what the manifest's image checks and the backend's
architecture check ask before anything is loaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import BadManifest


def local_config(name: str, revision: str | None) -> dict | None:
    """config.json of a local folder or a cached snapshot, read without transformers, or None."""
    return local_json(name, revision, "config.json")


def local_json(name: str, revision: str | None, filename: str) -> dict | None:
    """A json file of a local model folder or a cached snapshot, or None."""
    path: Path | None = None
    if Path(name).is_dir():
        path = Path(name) / filename
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(name, filename, revision=revision)
            path = Path(found) if isinstance(found, str) else None
        except (ImportError, ValueError):
            path = None
    try:
        return json.loads(path.read_text()) if path is not None and path.is_file() else None
    except (OSError, ValueError):
        return None


def pixel_limits(pre: dict) -> tuple[int, int, int] | None:
    """(min_pixels, max_pixels, factor) of a Qwen2-VL-style image processor config, or None for
    a processor that resizes every image to one fixed size (Gemma 3)."""
    size = pre.get("size") or {}
    lo = pre.get("min_pixels") or size.get("shortest_edge") or size.get("min_pixels")
    hi = pre.get("max_pixels") or size.get("longest_edge") or size.get("max_pixels")
    if lo is None or hi is None or "merge_size" not in pre:
        return None
    return int(lo), int(hi), int(pre.get("patch_size", 14)) * int(pre["merge_size"])


def image_limits(spec: dict) -> tuple[int, int, int] | None:
    """pixel_limits of the model's cached preprocessor_config.json: read once per check of many images."""
    return pixel_limits(local_json(spec["name"], spec.get("revision"), "preprocessor_config.json") or {})


_READ = object()  # image_limit_problem's default: read the limits from the model's files


def image_limit_problem(spec: dict, w: int, h: int, limits: Any = _READ) -> str | None:
    """Why the model's image processor would not take a w x h image without losing detail, with the
    fix, or None: Qwen2.5-VL's processor downscales anything over max_pixels (the source pane's
    characters would blur) and cannot take an aspect ratio over 200; Gemma 3's resizes every image
    to its fixed square (nothing refused here). `limits`: image_limits(spec), when already read."""
    if limits is _READ:
        limits = image_limits(spec)
    if limits is None:
        return None
    lo, hi, factor = limits
    if max(w, h) > 200 * min(w, h):
        return (f"{w}x{h}, an aspect ratio over 200, which the {spec['name']} image processor cannot resize; "
                "fix: plan images of a less extreme shape")
    if w * h > hi:
        return (f"{w}x{h} = {w * h} pixels, over the image processor's max_pixels {hi} of {spec['name']} (it would "
                "downscale the image and blur the source pane); fix: plan smaller images (the task's width and "
                "height) or raise max_pixels in the model's preprocessor_config.json")
    return None


def check_image_limits(spec: dict, file: Path, field: str, where: str, w: int, h: int, limits: Any = _READ) -> None:
    """BadManifest naming the file and field when the model's processor would not take the image
    as it is (image_limit_problem)."""
    problem = image_limit_problem(spec, w, h, limits)
    if problem is not None:
        raise BadManifest(f"{where}: field {field}: {file} is {problem}")


def is_vision_config(config: Any) -> bool:
    """A multimodal config: one with a vision tower."""
    vision = config.get("vision_config") if isinstance(config, dict) else getattr(config, "vision_config", None)
    return vision is not None


def vision_modules(model: Any) -> dict[str, Any]:
    """The modules of a vision-language model outside its language model and head (the vision
    tower, its projector or merger), by qualified name."""
    inner = model.model
    prefix = next(n for n, m in model.named_modules() if m is inner)
    return {f"{prefix}.{n}": m for n, m in inner.named_children() if n != "language_model"}
