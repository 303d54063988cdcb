"""Host settings (canary_trainer/host.py): every environment variable parsed in one place, with
defaults, and a malformed value named in a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary_trainer.errors import TrainerError
from canary_trainer.host import host


def test_defaults_when_nothing_is_set():
    h = host({})
    assert (h.threads, h.micro_batch, h.gradient_checkpointing, h.device_memory_gb, h.lock_wait_s) == \
        (None, None, False, None, None)
    assert h.parent_watch and h.cache == Path.home() / ".cache" / "canary-audit" and h.schemas_dir is None
    assert (h.rank, h.local_rank, h.world_size) == (0, 0, 1)


def test_values_are_parsed():
    h = host({"CANARY_TRAINER_THREADS": "2", "CANARY_TRAINER_MICRO_BATCH": "4",
              "CANARY_TRAINER_GRADIENT_CHECKPOINTING": "1", "CANARY_TRAINER_DEVICE_MEMORY_GB": "0.5",
              "CANARY_TRAINER_LOCK_WAIT_S": "1.5", "CANARY_TRAINER_PARENT_WATCH": "0", "CANARY_TRAINER_CACHE": "/c",
              "CANARY_SCHEMAS_DIR": "/s", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
    assert (h.threads, h.micro_batch, h.gradient_checkpointing, h.device_memory_gb, h.lock_wait_s) == (2, 4, True, 0.5, 1.5)
    assert not h.parent_watch and h.cache == Path("/c") and h.schemas_dir == Path("/s")
    assert (h.rank, h.local_rank, h.world_size) == (3, 1, 4)
    assert not host({"CANARY_TRAINER_GRADIENT_CHECKPOINTING": "0"}).gradient_checkpointing


def test_a_malformed_value_names_the_variable():
    with pytest.raises(TrainerError, match=r"CANARY_TRAINER_MICRO_BATCH: 'four' is not a whole number; fix:"):
        host({"CANARY_TRAINER_MICRO_BATCH": "four"})


def test_the_process_environment_is_read_at_each_call(monkeypatch):
    monkeypatch.setenv("CANARY_TRAINER_MICRO_BATCH", "3")
    assert host().micro_batch == 3
    monkeypatch.delenv("CANARY_TRAINER_MICRO_BATCH")
    assert host().micro_batch is None
