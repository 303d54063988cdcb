"""The built-in tiny backend: TinyGPT + the character tokenizer, on CPU or one GPU; with
`model.tiny.vision`, a tiny vision-language model (a conv stem in front of the decoder).

Vision: an image part is read as a grey crop, resized to the stem's height x width: the part's
`source` box when it has one (a canary's source pane: the identity line, the label and the code
region), else the whole image. The tiny model is thus told where the source pane is; it does not
search a screenshot for it (a CPU-sized stand-in for a VLM's vision tower, documented as such).
Images are read once per run from the folder `attach_images` names and kept as tensors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import BadRows
from .base import ModelBackend, PrefixState
from .tiny_model import TinyConfig, TinyGPT, VisionConfig
from .tiny_tokenizer import END, PAD, SPECIALS, CharTokenizer

GREEDY_ROWS = 64


def init_seed(spec: Mapping[str, Any]) -> int:
    """The seed of the model's initialisation: `tiny.pretrain.init_seed` when the manifest fixes
    the base's for every run, else `init_seed` (the run's seed)."""
    pretrain = spec.get("tiny", {}).get("pretrain")
    if pretrain is not None and "init_seed" in pretrain:
        return int(pretrain["init_seed"])
    return int(spec["init_seed"])


class TinyBackend(ModelBackend):
    name = "tiny"

    def __init__(self, spec: dict, device: torch.device):
        t = spec["tiny"]
        v = t.get("vision")
        vision = None if not v else VisionConfig(height=v["height"], width=v["width"], channels=tuple(v["channels"]),
                                                  rows=v["rows"], cols=v["cols"])
        self.tokenizer = CharTokenizer(self._image_ids if vision is not None else None)
        self.config = TinyConfig(vocab_size=self.tokenizer.vocab_size, n_layer=t["n_layer"], n_head=t["n_head"],
                                 d_model=t["d_model"], max_len=t["max_len"], dropout=t["dropout"], vision=vision)
        self.image_root: Path | None = None
        self._slots: dict[str, int] = {}
        self._pixels: list[torch.Tensor] = []
        # Initialisation draws from the global generator: seeding it here makes the starting
        # weights a function of the init seed alone (a pretrained base's own, when its manifest
        # fixes one for every seed).
        torch.manual_seed(init_seed(spec))
        self.model = TinyGPT(self.config).to(device)
        if vision is not None:
            self.model.image_bank = self._bank
        self.device = device
        self.model_label = spec["name"]
        self.revision = spec.get("revision")

    def attach_images(self, folder: Path) -> None:
        """The folder image parts' paths are relative to (the run folder)."""
        self.image_root = folder

    def _image_ids(self, key: str) -> list[int]:
        slot = self._slots.get(key)
        if slot is None:
            slot = len(self._pixels)
            self._pixels.append(self._load(key))
            self._slots[key] = slot
        assert self.config.vision is not None
        per = self.config.vision.tokens
        base = self.config.vocab_size + slot * per
        return list(range(base, base + per))

    def _load(self, key: str) -> torch.Tensor:
        from PIL import Image

        from ..images import read_image_file

        v = self.config.vision
        assert v is not None
        path, _, box = key.partition("#")
        file, img = read_image_file(self.image_root, path)
        if box:
            x0, y0, x1, y1 = (int(float(b)) for b in box.split(","))
            if not (0 <= x0 < x1 <= img.width and 0 <= y0 < y1 <= img.height):
                raise BadRows(f"{file}: source box [{box}] lies outside the {img.width}x{img.height} image; "
                              "fix: give a box inside the image")
            img = img.crop((x0, y0, x1, y1))
        grey = img.convert("L").resize((v.width, v.height), Image.Resampling.BILINEAR)
        data = torch.frombuffer(bytearray(grey.tobytes()), dtype=torch.uint8).view(1, v.height, v.width)
        return data.float().div_(255.0)

    def _bank(self, slots: list[int]) -> torch.Tensor:
        return torch.stack([self._pixels[s] for s in slots]).to(self.device)

    def render(self, messages: Sequence[Mapping[str, Any]], target: str | None = None) -> str:
        return self.tokenizer.render(messages, target)

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def added_texts(self) -> set[str]:
        return set(SPECIALS)

    @property
    def pad_id(self) -> int:
        return PAD

    def max_positions(self) -> int | None:
        return self.config.max_len

    def logits(self, ids: torch.Tensor, keep_last: int | None = None) -> torch.Tensor:
        out = self.model(ids)[0]
        return out if keep_last is None else out[:, out.shape[1] - keep_last:]

    def prefix(self, ctx_ids: list[int]) -> PrefixState:
        idx = torch.tensor([ctx_ids], dtype=torch.long, device=self.device)
        logits, kv = self.model(idx, last_only=True)
        return PrefixState(kv, len(ctx_ids), F.log_softmax(logits[0].float(), dim=-1))

    def extend(self, state: PrefixState, paths: torch.Tensor, cols: torch.Tensor, carry: Any = None,
               parent_of: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
        if carry is None:  # first level below the prompt, or a caller without a tree
            logits, kv = self.model(paths, prefix=state.cache, pos0=state.length, last_only=True)  # (N, V)
        else:
            # Each node adds one token on top of its parent's own keys/values (gathered, (N, H, l-1, hd)).
            past = [(k.index_select(0, parent_of), v.index_select(0, parent_of)) for k, v in carry]
            logits, kv = self.model(paths[:, -1:], past=past, prefix=state.cache,
                                    pos0=state.length + paths.shape[1] - 1, last_only=True)
        return F.log_softmax(logits.float(), dim=-1).index_select(1, cols), kv

    def join_carry(self, parts: list[Any]) -> Any:
        return [(torch.cat([p[i][0] for p in parts]), torch.cat([p[i][1] for p in parts])) for i in range(len(parts[0]))]

    def stop_ids(self) -> set[int]:
        return {END}

    def greedy_groups(self, lengths: list[int], limits: list[int]) -> list[list[int]]:
        """Contexts of equal length decode together (one position per step for the whole batch)."""
        by_len: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            by_len.setdefault(n, []).append(i)
        return [g[s: s + GREEDY_ROWS] for g in by_len.values() for s in range(0, len(g), GREEDY_ROWS)]

    def greedy_start(self, ctxs: list[list[int]]) -> tuple[torch.Tensor, Any]:
        idx = torch.tensor(ctxs, dtype=torch.long, device=self.device)
        logits, past = self.model(idx, last_only=True)
        return logits, (past, idx.shape[1])

    def greedy_step(self, state: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        past, pos = state
        logits, past = self.model(tokens[:, None], past=past, pos0=pos, last_only=True)
        return logits, (past, pos + 1)

    def greedy_keep(self, state: Any, rows: torch.Tensor) -> Any:
        past, pos = state
        return [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in past], pos
