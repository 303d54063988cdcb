"""Assemble result.json, validate it against schemas/result.schema.json, write it atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import schemas
from .atomic import write_json_atomic
from .errors import TrainerError

MAX_CURVE_POINTS = 2000


def thin_curve(losses: list[float]) -> list[list[float]]:
    """[update, loss] for every update (1-based), evenly thinned beyond MAX_CURVE_POINTS (the first
    and last updates are always kept)."""
    points = [[i + 1, float(v)] for i, v in enumerate(losses)]
    if len(points) <= MAX_CURVE_POINTS:
        return points
    keep = np.unique(np.linspace(0, len(points) - 1, MAX_CURVE_POINTS).round().astype(int))
    return [points[i] for i in keep]


def write_result(path: Path, result: dict) -> None:
    problem = schemas.first_error("result", result)
    if problem is not None:  # a trainer bug, not a user error: keep the evidence out of the contract
        raise TrainerError(f"result.json would not satisfy schemas/result.schema.json: {problem}")
    write_json_atomic(path, result)
