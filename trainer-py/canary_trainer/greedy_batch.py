"""Batched greedy decoding with early stop and no per-token host synchronisation.

Rows (probe x mode) are grouped by the backend (`greedy_groups`: equal lengths for tiny, a memory
bound for hf). Each step takes the argmax on the device and marks rows that hit a stop token or
their limit; every EVERY steps the host reads the tokens once, ends the rows whose code is decided
(decode.decided) and drops finished rows from the batch. A row's output is then cut at the first
token after which its code was decided, exactly where one-at-a-time greedy with the same rule
stops.
"""

from __future__ import annotations

from typing import Callable

import torch

from .backends.base import BatchedGreedy
from .errors import Interrupted
from .interrupt import StopFlag

EVERY = 8


def cut(backend: BatchedGreedy, ids: list[int], rule: Callable[[str], bool]) -> list[int]:
    """The shortest prefix of ids after which `rule(text)` holds (all of ids if none)."""
    for n in range(1, len(ids) + 1):
        if rule(backend.decode(ids[:n])):
            return ids[:n]
    return ids


def run_batched(backend: BatchedGreedy, reqs: list[tuple], stop: StopFlag | None = None) -> list[list[int]]:
    """Generated ids for each (context ids, limit, rule); a rule of None never ends a row early (it
    runs to a stop token or its limit: utility replies)."""
    limits = [_limit(backend, ctx, lim) for ctx, lim, _ in reqs]
    out: list[list[int]] = [[] for _ in reqs]
    for group in backend.greedy_groups([len(r[0]) for r in reqs], limits):
        if stop:
            raise Interrupted(f"stopped during greedy decoding ({stop.reason}); the run's next attempt continues from the newest checkpoint")
        got = _run_group(backend, [reqs[i][0] for i in group], [limits[i] for i in group],
                         [reqs[i][2] for i in group])
        for i, ids in zip(group, got):
            out[i] = ids
    return out


def _limit(backend: BatchedGreedy, ctx: list[int], limit: int) -> int:
    most = backend.max_positions()
    return max(0, min(limit, most - len(ctx)) if most else limit)


@torch.no_grad()
def _run_group(backend: BatchedGreedy, ctxs: list[list[int]], limits: list[int], rules: list) -> list[list[int]]:
    steps = max(limits)
    if steps == 0:
        return [[] for _ in ctxs]
    dev = backend.device
    stop_ids = torch.tensor(sorted(backend.stop_ids()) or [-2], device=dev)
    lim = torch.tensor(limits, device=dev)
    buf = torch.full((len(ctxs), steps), -1, dtype=torch.long, device=dev)
    rows = torch.arange(len(ctxs), device=dev)  # original index of each live row
    done = torch.zeros(len(ctxs), dtype=torch.bool, device=dev)
    logits, state = backend.greedy_start(ctxs)
    for t in range(steps):
        nxt = logits.argmax(-1)
        done = done | torch.isin(nxt, stop_ids) | (lim[rows] <= t)
        buf[rows, t] = torch.where(done, torch.full_like(nxt, -1), nxt)
        if (t + 1) % EVERY == 0 or t + 1 == steps:
            keep = _check(backend, buf[:, : t + 1], rows, done, rules)
            if not keep:
                break
            if len(keep) < len(rows):
                idx = torch.tensor(keep, device=dev)
                rows, done, nxt = rows[idx], done[idx], nxt[idx]
                state = backend.greedy_keep(state, idx)
        if t + 1 < steps:
            logits, state = backend.greedy_step(state, torch.where(done, torch.full_like(nxt, backend.pad_id), nxt))
    host = buf.cpu().tolist()
    out = []
    for ids, rule in zip(host, rules):
        ids = ids[: ids.index(-1)] if -1 in ids else ids
        out.append(ids if rule is None else cut(backend, ids, rule))
    return out


def _check(backend: BatchedGreedy, buf: torch.Tensor, rows: torch.Tensor, done: torch.Tensor, rules: list) -> list[int]:
    """One host read: positions (in `rows`) of the rows still to decode."""
    host = buf.cpu().tolist()
    keep = []
    for pos, (r, d) in enumerate(zip(rows.tolist(), done.tolist())):
        ids = host[r]
        ids = ids[: ids.index(-1)] if -1 in ids else ids
        if not d and (rules[r] is None or not rules[r](backend.decode(ids))):
            keep.append(pos)
    return keep
