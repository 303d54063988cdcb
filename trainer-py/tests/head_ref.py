"""The scoring head as it was before vocabulary tiling, kept as the reference that the tiled head
(backends/hf_tree.py `tiled_head`) is checked against: test_tiled_head.py and
bench/trainer_head_tile.py both call it."""

from __future__ import annotations

import torch

from canary_trainer.memory import HEAD_ROWS


def untiled_head_logprobs(hidden, head, cap, rows, cols):
    """Log-probabilities of `cols` at `rows` of `hidden`: one (HEAD_ROWS, V) float32 projection per
    block of rows, soft-capped when `cap` is set, torch.logsumexp over the whole vocabulary."""
    order = torch.argsort(rows, stable=True)
    rows_s, cols_s = rows[order], cols[order]
    out = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)
    for s in range(0, hidden.shape[0], HEAD_ROWS):
        lo, hi = torch.searchsorted(rows_s, torch.tensor([s, s + HEAD_ROWS], device=rows.device)).tolist()
        if lo == hi:
            continue
        logits = head(hidden[s: s + HEAD_ROWS]).float()
        if cap:
            logits = torch.tanh(logits / cap) * cap
        lse = torch.logsumexp(logits, dim=-1)
        r = rows_s[lo:hi] - s
        out[order[lo:hi]] = logits[r, cols_s[lo:hi]] - lse[r]
    return out
