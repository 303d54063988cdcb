"""The typed training config (canary_trainer/train_config.py) against the manifest schema: one field
per property of `training`, the schema's required ones without a default, and a loaded manifest's
training read as the same values."""

from __future__ import annotations

from dataclasses import MISSING, fields

from canary_trainer import schemas
from canary_trainer.manifest import load_manifest
from canary_trainer.train_config import TrainingConfig

from .fixtures import make_run


def test_fields_are_the_schemas_training_properties():
    training = schemas.load_schema("manifest")["properties"]["training"]
    names = [f.name for f in fields(TrainingConfig)]
    assert sorted(names) == sorted(training["properties"])
    optional = {f.name for f in fields(TrainingConfig) if f.default is not MISSING}
    assert optional <= set(training["properties"]) - set(training["required"])


def test_a_loaded_manifest_has_its_training_typed(tmp_path):
    manifest = load_manifest(make_run(tmp_path / "run", updates=4, batch_size=2, length=2))
    tr = manifest.training
    assert isinstance(tr, TrainingConfig)
    raw = manifest.data["training"]
    assert (tr.updates, tr.batch_size, tr.lr, tr.schedule, list(tr.betas)) == \
        (raw["updates"], raw["batch_size"], raw["lr"], raw["schedule"], raw["betas"])
    assert tr.gpus == raw.get("gpus", 1)
    assert TrainingConfig.from_manifest(tr.as_dict()) == tr
