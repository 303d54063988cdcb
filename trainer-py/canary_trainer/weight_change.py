"""How far fine-tuning moved each trainable parameter group (result.json `weight_change`).

A run whose optimizer never touched the weights (a frozen model, a zero learning rate, LoRA
adapters that stay at zero, gradients that never arrive) still decreases nothing and still writes
scores; the controller warns `weights_unchanged` when a group did not move. The start weights
are copied to host memory once, when training starts, and compared when it ends."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from .events import log

# Above this many bytes of trainable weights the start copy is not kept (the field is left out).
MAX_START_COPY_BYTES = 8 << 30


class WeightStart:
    """The trainable weights as training starts in this process (update `since_update`)."""

    def __init__(self, weights: dict[str, torch.Tensor], since_update: int):
        self.weights = weights
        self.since_update = since_update

    def record(self, trainable: Iterable[tuple[str, torch.nn.Parameter]]) -> dict:
        """result.json `weight_change`: per group ‖W₀‖, ‖W₁ − W₀‖ and their ratio (float64)."""
        groups: list[dict] = []
        changed = 0
        with torch.no_grad():
            for name, p in trainable:
                norm_start, norm_delta = _norms(self.weights[name], p.detach())
                changed += norm_delta > 0
                groups.append({"name": name, "numel": int(p.numel()), "norm_start": norm_start, "norm_delta": norm_delta,
                               "rel_change": norm_delta / norm_start if norm_start > 0 else None})
        return {"since_update": self.since_update, "changed": changed, "total": len(groups), "groups": groups}


# Elements per float64 chunk: a 136M-element embedding is compared 32 MiB at a time, not 1 GiB.
CHUNK = 1 << 22


def _norms(w0: torch.Tensor, w1: torch.Tensor) -> tuple[float, float]:
    """‖W₀‖ and ‖W₁ − W₀‖ (Frobenius), summed in float64 chunk by chunk on the host; an
    unchanged weight gives exactly 0."""
    start = delta = 0.0
    for a, b in zip(w0.reshape(-1).split(CHUNK), w1.reshape(-1).split(CHUNK)):
        a64 = a.to(torch.float64)
        start += float(torch.sum(a64 * a64))
        d = b.to("cpu", torch.float64) - a64
        delta += float(torch.sum(d * d))
    return start ** 0.5, delta ** 0.5


def start(trainable: Iterable[tuple[str, torch.nn.Parameter]], since_update: int) -> WeightStart | None:
    """Copy the trainable weights to host memory; None (with a log line) when they are too large."""
    params = list(trainable)
    size = sum(p.numel() * p.element_size() for _, p in params)
    if size > MAX_START_COPY_BYTES:
        log(f"weight change: {size / 2**30:.1f} GiB of trainable weights; not copied, result.json has no weight_change")
        return None
    with torch.no_grad():
        return WeightStart({name: p.detach().to("cpu", copy=True) for name, p in params}, since_update)
