"""Turn rows into training tensors: loss on the target only, in the manifest's exact order.

A row's prompt is rendered with the assistant turn opened; the full conversation must tokenize as
that prompt followed by more tokens, otherwise masking "the prompt" would mask the wrong tokens (a
chat template that rewrites earlier turns, a merge across the boundary). That is an error naming
the row, never silently trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .backends.base import TextModel
from .errors import BadRows

IGNORE = -100


@dataclass
class Encoded:
    ids: list[int]
    labels: list[int]

    @property
    def targets(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE)


def encode_row(backend: TextModel, row: dict, max_length: int, where: str) -> Encoded:
    prompt_ids = backend.tokenize(backend.render(row["prompt"]))
    full_ids = backend.tokenize(backend.render(row["prompt"], row["target"]))
    n = len(prompt_ids)
    if full_ids[:n] != prompt_ids:
        k = next((i for i, (a, b) in enumerate(zip(prompt_ids, full_ids)) if a != b), min(n, len(full_ids)))
        raise BadRows(f"{where}: the rendered prompt is not a token prefix of prompt+target (they differ at "
                      f"token {k} of {n}); fix: use a chat template/tokenizer that renders earlier turns "
                      "unchanged when a reply is added, or end the prompt on a token boundary")
    if len(full_ids) <= n:
        raise BadRows(f"{where}: field target: renders to no tokens; fix: give a non-empty target")
    limit = min(max_length, backend.max_positions() or max_length)
    if len(full_ids) > limit:
        raise BadRows(f"{where}: {len(full_ids)} tokens exceed training.max_length {limit}; "
                      "fix: raise training.max_length (rows are never truncated) or shorten the row")
    labels = [IGNORE] * n + full_ids[n:]
    end = backend.end_of_turn()
    if end is not None and end in full_ids[n:]:
        stop = full_ids.index(end, n) + 1
        labels[stop:] = [IGNORE] * (len(full_ids) - stop)
    return Encoded(full_ids, labels)


def encode_rows(backend: TextModel, rows: list[dict], max_length: int, path: Path) -> list[Encoded]:
    return [encode_row(backend, row, max_length, f"{path}:{n + 1}:1 (row {n})") for n, row in enumerate(rows)]


def batch_rows(update: int, batch_size: int) -> range:
    """Row indices consumed by 0-based update `update`: [update*B, (update+1)*B)."""
    return range(update * batch_size, (update + 1) * batch_size)


def right_pad(seqs: list[list[int]], fill: int) -> torch.Tensor:
    """Token lists as one (len, longest) tensor, each row padded on the right with `fill`."""
    out = torch.full((len(seqs), max(len(q) for q in seqs)), fill, dtype=torch.long)
    for r, q in enumerate(seqs):
        out[r, : len(q)] = torch.tensor(q, dtype=torch.long)
    return out


def collate(items: list[Encoded], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest row of this batch only. Causal attention means padding after a
    row's last token never changes that row's logits, so no attention mask is needed."""
    return right_pad([e.ids for e in items], pad_id), right_pad([e.labels for e in items], IGNORE)
