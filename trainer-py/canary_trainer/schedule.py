"""Learning-rate schedules: linear warmup from 0 to the peak, then constant or cosine decay."""

from __future__ import annotations

import math
from typing import Any, Mapping


def lr_at(update: int, peak: float, schedule: Mapping[str, Any], total: int) -> float:
    """Learning rate for the 0-based optimizer update `update` of `total`."""
    warmup = schedule["warmup_updates"]
    if warmup > 0 and update < warmup:
        return peak * (update + 1) / warmup
    if schedule["kind"] == "constant":
        return peak
    floor = peak * schedule["min_lr_ratio"]
    span = max(1, total - warmup)
    progress = min(1.0, (update - warmup) / span)
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
