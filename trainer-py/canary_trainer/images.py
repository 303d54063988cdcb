"""The image files a manifest lists (image tasks, `manifest.images`) and the image parts of rows.

Files: each must sit beside the rows with the sha256 the controller recorded, and the run's
model must read images: the tiny backend with `model.tiny.vision`, the hf backend with a
vision-language model (a config with a vision_config: Qwen2.5-VL, Gemma 3). The tiny model without
a vision stem and a text-only hf model are refused before anything is trained. For a model that
reads them, every listed file must decode as an image (PNG or JPEG) within the model's pixel
limit: the tiny stem's max_pixels; Qwen2.5-VL's image processor max_pixels (it would downscale a
larger image) and aspect ratio 200; Gemma 3 resizes every image to its fixed square, so only the
decode is checked.

Every file is read through one bound (`bounded.read_bounded`) before a byte of it is hashed or decoded:
opened without following a final symlink and without waiting on a FIFO, then a regular file of at
most the size the manifest records (or MAX_IMAGE_FILE_BYTES) by fstat of that same handle. A run
image that is a link to /dev/zero, a FIFO or an oversized file is refused in one line. The header
comes before any decode: a size over the pixel cap (the model's where known, else
DEFAULT_MAX_PIXELS) is refused from the header, so a small file that says 20000x20000 or a zlib
bomb is never inflated.

Parts (`check_parts`): an image part's width and height are the file's, and its `source` box (the
canary's source pane, [x0, y0, x1, y1]) lies inside the image. Every problem is one line naming
the file and the field.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path
from typing import Any

from .bounded import read_bounded
from .errors import BadManifest, BadRows

# Backends that read image parts of a message (tiny with model.tiny.vision, hf with a
# vision-language model).
IMAGE_BACKENDS: frozenset[str] = frozenset({"tiny", "hf"})


# Largest image file read, bytes, when the manifest records no size (the controller's cap too).
MAX_IMAGE_FILE_BYTES = 256 * 1024 * 1024
# Pixel cap checked from the header before any decode when the model states none: 8192 x 8192
# (256 MB decoded as RGBA), the controller's plan-time cap; below PIL's own bomb limit (89.5 M).
DEFAULT_MAX_PIXELS = 8192 * 8192

def hf_config(model: dict) -> dict | None:
    """The hf model's config.json, read from its local folder or cached snapshot (None when it is
    not here: loading the backend then says so)."""
    from .hf_config import local_config

    return local_config(model["name"], model.get("revision"))


def reads_images(model: dict) -> bool:
    if model["backend"] == "tiny":
        return bool(model.get("tiny", {}).get("vision"))
    if model["backend"] == "hf":
        config = hf_config(model)
        return config is None or config.get("vision_config") is not None
    return False


def header_size(raw: bytes) -> tuple[str, int, int] | None:
    """(format, width, height) from a PNG's IHDR or a JPEG's first SOFn segment, read before PIL
    sees the bytes; None for anything else (PIL's own header check then applies)."""
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR" and len(raw) >= 24:
        return "PNG", int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
    if raw[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 9 <= len(raw) and raw[i] == 0xFF:
        marker = raw[i + 1]
        if marker == 0xFF:
            i += 1
        elif marker == 0x01 or 0xD0 <= marker <= 0xD8:
            i += 2
        elif marker in (0xD9, 0xDA):
            return None
        elif 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return "JPEG", int.from_bytes(raw[i + 7:i + 9], "big"), int.from_bytes(raw[i + 5:i + 7], "big")
        else:
            i += 2 + int.from_bytes(raw[i + 2:i + 4], "big")
    return None


def decode_image(raw: bytes, full: bool = True, max_pixels: int = DEFAULT_MAX_PIXELS) -> Any:
    """A PIL image decoded from bytes, or ValueError naming why it is not one. `full` False reads
    the header and checks the file's structure (PNG chunk checksums) without decompressing the
    pixels: the manifest check, cheap for thousands of images; the backend decodes fully. Either
    way the header's size is checked against `max_pixels` first (opening reads only the header)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            header = header_size(raw)
            if header is not None and header[1] * header[2] > max_pixels:
                kind, w, h = header
                raise ValueError(f"its {kind} header says {w}x{h} = {w * h} pixels ({4 * w * h} bytes decoded), "
                                 f"over the cap of {max_pixels} pixels; not decoded")
            img = Image.open(io.BytesIO(raw))
            if full:
                img.load()
            else:
                img.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombWarning,
            Image.DecompressionBombError) as exc:
        raise ValueError(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'undecodable'}") from exc
    return img


def read_image_file(root: Path | None, path: str) -> tuple[Path, Any]:
    """(file, image): the image at `path` (relative to a run folder `root`), fully decoded, or BadRows
    naming the file and the fix: no folder given, a file that cannot be read, bytes not an image."""
    if root is None:
        raise BadRows(f"image {path}: the backend was given no folder to read images from")
    file = root / path
    try:
        return file, decode_image(read_bounded(file, MAX_IMAGE_FILE_BYTES))
    except OSError as exc:
        raise BadRows(f"{file}: cannot read the image ({exc.strerror}); fix: re-plan the run so its images "
                      "are written beside the rows") from exc
    except ValueError as exc:
        raise BadRows(f"{file}: not a readable image ({exc}); fix: re-plan the run") from exc


def check_images(path: Path, data: dict) -> dict[str, tuple[int, int]]:
    """Check the manifest's `images`; returns (width, height) by path for a backend that reads them."""
    images = data.get("images")
    if not images:
        return {}
    folder = path.parent
    raws: list[bytes] = []
    for i, ref in enumerate(images):
        file = folder / ref["path"]
        # The size the controller recorded bounds the read: a link to /dev/zero, a FIFO or a
        # swapped file is refused before a byte is hashed.
        try:
            raw = read_bounded(file, int(ref.get("bytes", MAX_IMAGE_FILE_BYTES)))
        except OSError as exc:
            raise BadManifest(f"{path}: field images[{i}]: {file} cannot be read ({exc.strerror}); "
                              "fix: re-plan the run so its images are written beside the rows") from exc
        except ValueError as exc:
            raise BadManifest(f"{path}: field images[{i}]: {file} {exc}; not read — fix: re-plan the run so "
                              "its images are written beside the rows") from exc
        digest = hashlib.sha256(raw).hexdigest()
        if digest != ref["sha256"]:
            raise BadManifest(f"{path}: field images[{i}].sha256: {file} has sha256 {digest}, not {ref['sha256']}; "
                              "fix: the image changed or is damaged since planning: re-plan the run")
        raws.append(raw)
    model = data["model"]
    backend = model["backend"]
    if not reads_images(model):
        if backend == "hf":
            raise BadManifest(f"{path}: field model.name: {model['name']} is a text-only model (its config.json has "
                              f"no vision_config), but the rows show {len(images)} images; fix: choose a "
                              "vision-language model (Qwen2.5-VL, Gemma 3) or plan a text task for this model")
        raise BadManifest(f"{path}: field model.backend: {backend} reads text only (no model.tiny.vision), but the "
                          f"rows show {len(images)} images; fix: use a tiny model with a vision stem (the tiny-vlm "
                          "preset, or model.tiny.vision)")
    limit = model["tiny"]["vision"]["max_pixels"] if backend == "tiny" else None
    if limit is None:
        from .hf_config import check_image_limits, image_limits

        processor_limits = image_limits(model)  # one read for every image of the manifest
    sizes: dict[str, tuple[int, int]] = {}
    for i, (ref, raw) in enumerate(zip(images, raws)):
        file = folder / ref["path"]
        try:
            # Header first (DEFAULT_MAX_PIXELS), then verify: chunk checksums, no inflating; the
            # model's own limit follows from the same header.
            img = decode_image(raw, full=False)
        except ValueError as exc:
            raise BadManifest(f"{path}: field images[{i}]: {file} is not a readable image ({exc}); "
                              "fix: re-plan the run so its images are rendered again") from exc
        w, h = img.size
        if limit is None:
            check_image_limits(model, file, f"images[{i}]", str(path), w, h, processor_limits)
        elif w * h > limit:
            raise BadManifest(f"{path}: field images[{i}]: {file} is {w}x{h} = {w * h} pixels, over the model's "
                              f"model.tiny.vision.max_pixels {limit}; fix: plan smaller images (the task's width "
                              "and height) or raise max_pixels")
        sizes[ref["path"]] = (w, h)
    return sizes


def check_parts(messages: list[dict], where: str, sizes: dict[str, tuple[int, int]]) -> None:
    """Every image part of `messages` names a listed image, with its size, and a source box inside it."""
    for m, msg in enumerate(messages):
        content = msg["content"]
        if isinstance(content, str):
            continue
        for p, part in enumerate(content):
            if part["type"] != "image":
                continue
            field = f"prompt[{m}].content[{p}]"
            got = sizes.get(part["path"])
            if got is None:
                raise BadRows(f"{where}: field {field}.path: {part['path']} is not in the manifest's images; "
                              "fix: re-plan the run so every image a row shows is listed")
            if (part["width"], part["height"]) != got:
                raise BadRows(f"{where}: field {field}.width: the part says {part['width']}x{part['height']} but "
                              f"{part['path']} is {got[0]}x{got[1]}; fix: re-plan the run")
            box = part.get("source")
            if box is not None:
                x0, y0, x1, y1 = box
                if not (0 <= x0 < x1 <= got[0] and 0 <= y0 < y1 <= got[1]):
                    raise BadRows(f"{where}: field {field}.source: [{x0}, {y0}, {x1}, {y1}] lies outside the "
                                  f"{got[0]}x{got[1]} image or is empty; fix: give a box inside the image with x1 > x0, y1 > y0")


def check_rows(rows: list[dict], path: Path, sizes: dict[str, tuple[int, int]]) -> None:
    for n, row in enumerate(rows):
        check_parts(row["prompt"], f"{path}:{n + 1}:1 (row {n})", sizes)
