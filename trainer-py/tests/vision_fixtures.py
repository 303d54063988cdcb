"""Run folders with image rows for the tiny VLM: make_run's rows and probes with a screenshot-like
PNG in front of each user message (a source box around the code's line on canaries and probes),
the images listed in the manifest with their sha256 and sizes."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from PIL import Image, ImageDraw

from .fixtures import make_run

VISION = {"height": 16, "width": 40, "channels": [4], "rows": 2, "cols": 3, "max_pixels": 200 * 200}
TINY_VLM = {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 256, "vision": VISION}
SIZE = (96, 48)
SOURCE = [8, 8, 88, 40]


def png(text: str, size: tuple[int, int] = SIZE) -> bytes:
    img = Image.new("L", size, 255)
    ImageDraw.Draw(img).text((12, 16), text, fill=0)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _put(folder: Path, data: bytes, store: dict[str, bytes]) -> dict:
    sha = hashlib.sha256(data).hexdigest()
    path = f"images/{sha}.png"
    (folder / "images").mkdir(exist_ok=True)
    (folder / path).write_bytes(data)
    store[path] = data
    w, h = Image.open(io.BytesIO(data)).size
    return {"type": "image", "path": path, "sha256": sha, "width": w, "height": h}


def _with_image(messages: list[dict], part: dict) -> list[dict]:
    out = []
    for m in messages:
        if m["role"] == "user":
            m = {**m, "content": [part, {"type": "text", "text": m["content"]}]}
        out.append(m)
    return out


def _rewrite_rows(folder: Path, ref: dict, store: dict[str, bytes], source: list[int] | None) -> None:
    rows = [json.loads(x) for x in (folder / ref["path"]).read_text().splitlines()]
    for row in rows:
        text = row["prompt"][-1]["content"]
        part = _put(folder, png(text[-12:]), store)
        if row["kind"] == "canary" and source is not None:
            part["source"] = list(source)
        row["prompt"] = _with_image(row["prompt"], part)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (folder / ref["path"]).write_bytes(data)
    ref["sha256"] = hashlib.sha256(data).hexdigest()


def make_vision_run(folder: Path, *, source: list[int] | None = SOURCE, tiny: dict | None = None, **kw) -> Path:
    """make_run with every row, utility row, pretraining row and probe showing an image; returns the
    manifest path."""
    manifest = make_run(folder, tiny=tiny or TINY_VLM, **kw)
    data = json.loads(manifest.read_text())
    store: dict[str, bytes] = {}
    _rewrite_rows(folder, data["rows"], store, source)
    if "utility" in data:
        _rewrite_rows(folder, data["utility"], store, None)
    pretrain = data["model"].get("tiny", {}).get("pretrain")
    if pretrain is not None:
        _rewrite_rows(folder, pretrain["rows"], store, None)
    for probe in data["probes"]:
        text = probe["prompt"][-1]["content"]
        part = _put(folder, png(text[-12:]), store)
        if source is not None:
            part["source"] = list(source)
        probe["prompt"] = _with_image(probe["prompt"], part)
    data["images"] = [{"path": p, "sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b)}
                      for p, b in sorted(store.items())]
    manifest.write_text(json.dumps(data, indent=1))
    return manifest
