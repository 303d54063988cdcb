"""Character tokenizer and chat rendering of the tiny backend.

Every printable ASCII character, newline and tab is one token, so every digit of a code is one
token. Role markers are single special tokens. Any other character maps to <|unk|> (counted, so a
run can report it) rather than failing: the rendered text files still show the original text.

Image parts of a message (vision models only) render as one marker, `<|image:PATH|>` or, with the
part's source box, `<|image:PATH#x0,y0,x1,y1|>`; `encode` turns a marker into the image's tokens
through the `image_ids` callback the backend gives (ids above the vocabulary: the model embeds them
with its vision stem, never predicts them). Without the callback a marker is an error.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

SPECIALS = ["<|pad|>", "<|unk|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
CHARS = ["\n", "\t"] + [chr(c) for c in range(32, 127)]
PAD, UNK, END = 0, 1, SPECIALS.index("<|end|>")
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + r"|<\|image:[^|<>]+\|>)")
IMAGE_PREFIX = "<|image:"


def image_marker(part: Mapping[str, Any]) -> str:
    box = part.get("source")
    return f"{IMAGE_PREFIX}{part['path']}" + ("" if box is None else "#" + ",".join(str(v) for v in box)) + "|>"


def content_text(content: str | Sequence[Mapping[str, Any]]) -> str:
    """A message's content as the tiny model reads it: the string, or its parts in order (image
    parts as markers)."""
    if isinstance(content, str):
        return content
    return "".join(p["text"] if p["type"] == "text" else image_marker(p) for p in content)


class CharTokenizer:
    def __init__(self, image_ids: Callable[[str], list[int]] | None = None) -> None:
        self.image_ids = image_ids
        self.itos = SPECIALS + CHARS
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.char_ids = {c: i for i, c in enumerate(self.itos) if i >= len(SPECIALS)}

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def render(self, messages: Sequence[Mapping[str, Any]], target: str | None = None) -> str:
        # One line per turn keeps the rendered files readable; the final assistant turn has no
        # trailing newline so <|end|> is the last trained token and the natural stop signal.
        text = "".join(f"<|{m['role']}|>{content_text(m['content'])}<|end|>\n" for m in messages) + "<|assistant|>"
        if target is not None:
            text += target + "<|end|>"
        return text

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        get = self.char_ids.get
        for piece in _SPECIAL_RE.split(text):
            if not piece:
                continue
            if piece.startswith(IMAGE_PREFIX) and piece.endswith("|>"):
                if self.image_ids is None:
                    raise ValueError(f"an image part ({piece}) given to a model that reads text only")
                ids.extend(self.image_ids(piece[len(IMAGE_PREFIX):-2]))
                continue
            special = self.stoi.get(piece) if piece.startswith("<|") else None
            if special is not None and special < len(SPECIALS):
                ids.append(special)
            else:
                ids.extend(get(ch, UNK) for ch in piece)
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join(self.itos[i] for i in ids if i >= len(SPECIALS) or i == UNK)
