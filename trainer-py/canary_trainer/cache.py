"""The trainer's content-addressed cache folder (the audit's cache/: the tiny base models, the shared
base evaluation and utility replies): `$CANARY_TRAINER_CACHE`, default `~/.cache/canary-audit`."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    env = os.environ.get("CANARY_TRAINER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "canary-audit"
