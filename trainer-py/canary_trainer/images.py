"""The image files a manifest lists (image tasks, `manifest.images`): each must sit beside the rows
with the sha256 the controller recorded, and the run's backend must read images. Neither backend
does yet (the tiny model reads characters; the hf backend loads a tokenizer, not a processor), so
a manifest with images is refused before anything is trained, in one line naming the field."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import BadManifest

# Backends that read image parts of a message; none yet.
IMAGE_BACKENDS: frozenset[str] = frozenset()


def check_images(path: Path, data: dict) -> None:
    images = data.get("images")
    if not images:
        return
    folder = path.parent
    for i, ref in enumerate(images):
        file = folder / ref["path"]
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise BadManifest(f"{path}: field images[{i}]: {file} cannot be read ({exc.strerror}); "
                              "fix: re-plan the run so its images are written beside the rows") from exc
        digest = hashlib.sha256(raw).hexdigest()
        if digest != ref["sha256"]:
            raise BadManifest(f"{path}: field images[{i}].sha256: {file} has sha256 {digest}, not {ref['sha256']}; "
                              "fix: the image changed or is damaged since planning: re-plan the run")
    backend = data["model"]["backend"]
    if backend not in IMAGE_BACKENDS:
        what = "reads text only" if backend == "tiny" else "does not read image rows yet (no processor or vision tower)"
        raise BadManifest(f"{path}: field model.backend: {backend} {what}, but the rows show {len(images)} images; "
                          "fix: plan a text task for this model (vision-language training is not built yet)")
