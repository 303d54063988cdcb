"""Image parts for the hf backend's vision-language models (Qwen2.5-VL, Gemma 3).

Text: a message's image part goes through the model's own chat template (the processor's, with
its image placeholder: Qwen2.5-VL's `<|vision_start|><|image_pad|><|vision_end|>`, Gemma 3's
`<start_of_image>`); the k-th placeholder of the rendered text is then replaced with a marker
naming the k-th image part, `<|image:PATH|>` (Gemma 3: inside the `\\n\\n<start_of_image>` ...
`<end_of_image>\\n\\n` sequence its processor writes), so the rendered text says which image sits
where. `tokenize` turns a marker into that image's token ids: ids at or above the vocabulary
(`base` + the image's slot offset + j), one per image token the processor would write (Qwen2.5-VL:
the resized grid's patches / merge_size^2; Gemma 3: mm_tokens_per_image). The ids alone thus say
which image each position shows, so every id-based path of the trainer (the loss mask, prefix
tries, greedy batches) works unchanged, and two prompts with different images never share a
cached prefix.

Model inputs (`inputs`): the image tokens become the model's image token id, the text embedded,
each distinct image of the batch encoded once by the vision tower and scattered into its
positions; position ids explicit (Qwen2.5-VL: the model's own 3D rope index, `get_rope_index`; a
continuation after the prompt counts from the prompt's last position + 1, `offsets`); Gemma 3's
token_type_ids (image tokens attend to each other both ways, as its processor and generate do).

Images are read from the folder `attach_images` names, decoded fully, converted to RGB and
preprocessed by the model's image processor (Qwen2.5-VL: resized to a multiple of 28 within
min_pixels..max_pixels; Gemma 3: resized to its fixed square, no pan and scan), once per run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from ..errors import BadManifest, BadRows
from ..hf_config import local_json

MARKER_PREFIX = "<|image:"
MARKER_RE = re.compile(r"(<\|image:[^|<>]+\|>)")
QWEN = ("qwen2_5_vl", "qwen2_vl")
GEMMA = ("gemma3",)
FAMILIES = QWEN + GEMMA


def marker(path: str) -> str:
    return f"{MARKER_PREFIX}{path}|>"


def message_parts(messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The image parts of messages, in order."""
    return [p for m in messages if not isinstance(m["content"], str) for p in m["content"] if p["type"] == "image"]


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Messages as chat templates read them: image parts stay {"type": "image", ...}; text parts
    {"type": "text", "text": ...}; string content unchanged."""
    return [dict(m) for m in messages]


class Vision:
    """The image side of a loaded vision-language model: its template placeholder, its image
    processor and the run's images (slots of virtual token ids)."""

    model: Any = None  # the loaded model (set once its weights are in place)

    def __init__(self, tf: Any, spec: dict, config: Any, tokenizer: Any, load_kw: dict) -> None:
        self.family = config.model_type
        if self.family not in FAMILIES:
            raise BadManifest(f"model.name {spec['name']!r}: a {self.family} vision-language model, but the hf "
                              f"backend reads images for {', '.join(FAMILIES)} only; fix: choose a Qwen2.5-VL or "
                              "Gemma 3 model, or plan a text task")
        self.tokenizer = tokenizer
        self.image_processor = load_image_processor(spec, load_kw)
        text_vocab = config.get_text_config().vocab_size
        self.base = max(text_vocab, len(tokenizer))
        if self.family in QWEN:
            self.image_token_id = config.image_token_id
            self.placeholder = tokenizer.convert_ids_to_tokens(config.image_token_id)
            self.before, self.after = "", ""
            self.merge = int(self.image_processor.merge_size)
        else:
            self.image_token_id = config.image_token_id
            boi = tokenizer.convert_ids_to_tokens(config.boi_token_id)
            eoi = tokenizer.convert_ids_to_tokens(config.eoi_token_id)
            self.placeholder = boi
            self.before, self.after = f"\n\n{boi}", f"{eoi}\n\n"
            self.per_image = int(config.mm_tokens_per_image)
        self.root: Path | None = None
        # Without a folder (the plan-time row count): each image's (width, height) from its part,
        # enough to count its tokens without reading it.
        self.sizes: dict[str, tuple[int, int]] = {}
        self._slot: dict[str, int] = {}
        self._starts: list[int] = []
        self._counts: list[int] = []
        self._pixels: list[torch.Tensor | None] = []
        self._grids: list[torch.Tensor | None] = []

    # ---- text ---------------------------------------------------------------------------------
    def place(self, text: str, messages: Sequence[Mapping[str, Any]]) -> str:
        """The rendered text with the k-th image placeholder replaced by the k-th part's marker."""
        parts = message_parts(messages)
        pieces = text.split(self.placeholder)
        if len(pieces) - 1 != len(parts):
            raise BadRows(f"the chat template wrote {len(pieces) - 1} image placeholders {self.placeholder!r} for "
                          f"{len(parts)} image parts (a text part containing the placeholder, or a template "
                          "without image support); fix: remove the placeholder from the text")
        out = [pieces[0]]
        for part, piece in zip(parts, pieces[1:]):
            out.append(self.before + marker(part["path"]) + self.after + piece)
        return "".join(out)

    def image_ids(self, path: str) -> list[int]:
        slot = self._slot.get(path)
        if slot is None:
            slot = self._load(path)
        start = self._starts[slot]
        return list(range(start, start + self._counts[slot]))

    def _load(self, path: str) -> int:
        from ..images import read_image_file

        if self.root is None and path in self.sizes:
            return self._add(path, self.count(*self.sizes[path]), None, None)
        file, img = read_image_file(self.root, path)
        img = img.convert("RGB")
        try:
            got = self.image_processor(images=[img], return_tensors="pt")
        except ValueError as exc:
            raise BadRows(f"{file}: the image processor refuses the {img.width}x{img.height} image "
                          f"({str(exc).splitlines()[0]}); fix: plan images of another size") from exc
        if self.family in QWEN:
            grid = got["image_grid_thw"][0]
            return self._add(path, int(grid.prod()) // self.merge ** 2, got["pixel_values"], grid)
        return self._add(path, self.per_image, got["pixel_values"], None)

    def count(self, width: int, height: int) -> int:
        """Image tokens of a width x height image, without its pixels."""
        if self.family in QWEN:
            return int(self.image_processor.get_number_of_image_patches(height, width, {})) // self.merge ** 2
        return self.per_image

    def _add(self, path: str, count: int, pixels: Any, grid: Any) -> int:
        slot = len(self._counts)
        self._starts.append(self.base + sum(self._counts))
        self._counts.append(count)
        self._pixels.append(pixels)
        self._grids.append(grid)
        self._slot[path] = slot
        return slot

    def tokenize_batch(self, texts: list[str], encode_many: Callable[[list[str]], list[list[int]]]) -> list[list[int]]:
        """Ids of rendered texts: `encode_many` tokenizes the text between markers, a marker
        becomes its image's ids."""
        split = [MARKER_RE.split(t) for t in texts]
        plain = [p for pieces in split for i, p in enumerate(pieces) if i % 2 == 0]
        encoded = iter(encode_many(plain))
        out = []
        for pieces in split:
            ids: list[int] = []
            for i, p in enumerate(pieces):
                if i % 2 == 0:
                    ids.extend(next(encoded))
                else:
                    ids.extend(self.image_ids(p[len(MARKER_PREFIX):-2]))
            out.append(ids)
        return out

    # ---- model inputs -------------------------------------------------------------------------
    def inputs(self, ids: torch.Tensor, mask: torch.Tensor | None) -> tuple[dict, torch.Tensor]:
        """Keyword arguments of the model's forward for ids (B, T) (image tokens as virtual ids)
        and an optional attention mask (left padding), and each row's position offset (B,): the
        position of a token appended after the row's last one is its length + offset."""
        model = self.model
        is_img = ids >= self.base
        real = torch.where(is_img, torch.full_like(ids, self.image_token_id), ids)
        embeds = model.get_input_embeddings()(real)
        occ_grids: list[torch.Tensor] = []
        if bool(is_img.any()):
            starts = torch.tensor(self._starts, device=ids.device)
            virt = ids[is_img]
            slot = torch.searchsorted(starts, virt, right=True) - 1
            used, local = torch.unique(slot, return_inverse=True)
            used_l = used.tolist()
            feats = self._features(used_l)  # (sum of used images' tokens, H), in `used` order
            counts = torch.tensor([self._counts[s] for s in used_l], device=ids.device)
            feat_start = torch.cumsum(counts, 0) - counts
            index = feat_start[local] + (virt - starts[slot])
            embeds = embeds.clone()
            embeds[is_img] = feats[index].to(embeds.dtype)
            if self.family in QWEN:  # the grid of each image occurrence, in reading order
                for r in range(ids.shape[0]):
                    row = ids[r][is_img[r]]
                    if row.numel():
                        row_slot = torch.searchsorted(starts, row, right=True) - 1
                        first = torch.ones_like(row_slot, dtype=torch.bool)
                        first[1:] = (row[1:] != row[:-1] + 1) | (row_slot[1:] != row_slot[:-1])
                        occ_grids.extend(self._grids[s] for s in row_slot[first].tolist())
        kw: dict = {"inputs_embeds": embeds}
        b, t = ids.shape
        if mask is not None:
            kw["attention_mask"] = mask
        if self.family in QWEN:
            if occ_grids:
                tt = is_img.int()
                grids = torch.stack(occ_grids).to(ids.device)
                pos, delta = model.model.get_rope_index(input_ids=real, mm_token_type_ids=tt, image_grid_thw=grids,
                                                        attention_mask=mask)
                kw["position_ids"] = pos
                offsets = delta.reshape(-1).to(ids.device)
            else:
                kw["position_ids"] = self._text_positions(b, t, mask, ids.device)
                offsets = torch.zeros(b, dtype=torch.long, device=ids.device)
        else:
            kw["position_ids"] = self._text_positions(b, t, mask, ids.device)
            if bool(is_img.any()):
                kw["token_type_ids"] = is_img.long()
            offsets = torch.zeros(b, dtype=torch.long, device=ids.device)
        return kw, offsets

    @staticmethod
    def _text_positions(b: int, t: int, mask: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        if mask is None:
            return torch.arange(t, device=device)[None].expand(b, t)
        return (mask.long().cumsum(1) - 1).clamp(min=0)

    def _features(self, slots: list[int]) -> torch.Tensor:
        """Each image's token embeddings from the vision tower (and projector), concatenated."""
        model = self.model
        device = model.get_input_embeddings().weight.device
        pixels = torch.cat([self._pixels[s] for s in slots]).to(device)
        if self.family in QWEN:
            grids = torch.stack([self._grids[s] for s in slots]).to(device)
            out = model.model.get_image_features(pixel_values=pixels, image_grid_thw=grids).pooler_output
            return torch.cat(list(out))
        out = model.model.get_image_features(pixel_values=pixels).pooler_output
        return out.reshape(-1, out.shape[-1])

    def image_tokens(self, path: str) -> int:
        return len(self.image_ids(path))


def load_image_processor(spec: dict, load_kw: dict) -> Any:
    """The model's image processor, offline, in its PIL implementation: the same pixels on every
    host (the torchvision one differs slightly, and the pinned trainer environment has no
    torchvision, which AutoProcessor would also need for Qwen2.5-VL's video processor). The
    chat template comes from the processor files too (`chat_template`); the tokenizer is loaded
    on its own, so the processor object itself is not needed."""
    from transformers.models.auto.image_processing_auto import AutoImageProcessor

    try:
        return AutoImageProcessor.from_pretrained(spec["name"], backend="pil", **load_kw)
    except (ImportError, OSError, ValueError) as exc:
        raise BadManifest(f"model.name {spec['name']!r}: a vision-language model without a readable image processor "
                          f"(preprocessor_config.json: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                          "fix: download the model's processor files with it") from exc


def chat_template(spec: dict, tokenizer: Any) -> str | None:
    """The processor's chat template (the one that writes image placeholders), else the tokenizer's."""
    for filename in ("chat_template.json",):
        data = local_json(spec["name"], spec.get("revision"), filename)
        if data and data.get("chat_template"):
            return data["chat_template"]
    name = spec["name"]
    text: str | None = None
    if Path(name).is_dir() and (Path(name) / "chat_template.jinja").is_file():
        text = (Path(name) / "chat_template.jinja").read_text()
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(name, "chat_template.jinja", revision=spec.get("revision"))
            if isinstance(found, str):
                text = Path(found).read_text()
        except (ImportError, ValueError, OSError):
            text = None
    return text or getattr(tokenizer, "chat_template", None)
