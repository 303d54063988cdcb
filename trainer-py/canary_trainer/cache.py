"""The trainer's content-addressed cache folder (the audit's cache/: the tiny base models, the shared
base evaluation and utility replies): `$CANARY_TRAINER_CACHE`, default `~/.cache/canary-audit`."""

from __future__ import annotations

from pathlib import Path

from .host import host


def cache_root() -> Path:
    return host().cache
