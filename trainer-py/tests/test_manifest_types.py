"""canary_trainer.manifest_types against schemas/manifest.schema.json: walking the schema from its
root and the TypedDicts from ManifestData together, every object the schema gives properties has a
TypedDict with exactly those keys, Required exactly where the schema requires the key or gives it a
default (the loader applies defaults), and every enum or const is the annotation's Literal."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path

from canary_trainer import manifest_types
from canary_trainer.manifest import load_manifest
from canary_trainer.manifest_types import ManifestData

from .fixtures import make_run

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "manifest.schema.json").read_text())


def _local(ref: str) -> dict:
    node = SCHEMA
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _deref(node: dict) -> dict:
    while "$ref" in node and node["$ref"].startswith("#/"):
        node = _local(node["$ref"])
    return node


def _strip(annotation):
    """The annotation without NotRequired/Required and without `| None`."""
    origin = typing.get_origin(annotation)
    if origin in (typing.NotRequired, typing.Required):
        return _strip(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _strip(args[0]) if len(args) == 1 else annotation
    return annotation


def _is_typeddict(t) -> bool:
    return isinstance(t, type) and typing.is_typeddict(t)


def _check(schema: dict, td, where: str, seen: list[str]) -> None:
    seen.append(td.__name__)
    props = schema["properties"]
    hints = typing.get_type_hints(td, include_extras=True)
    assert set(hints) == set(props), f"{where} ({td.__name__}): keys {sorted(hints)} != schema {sorted(props)}"
    required = set(schema.get("required", [])) | {k for k, v in props.items() if "default" in v}
    assert set(td.__required_keys__) == required, \
        f"{where} ({td.__name__}): Required {sorted(td.__required_keys__)} != schema required or defaulted {sorted(required)}"
    for key, sub in props.items():
        path = f"{where}.{key}"
        sub = _deref(sub)
        ann = _strip(hints[key])
        values = sub.get("enum", [sub["const"]] if "const" in sub else None)
        if values is not None:
            assert typing.get_origin(ann) is typing.Literal and set(typing.get_args(ann)) == set(values), path
        if "properties" in sub:  # (provenance refers to another schema: typed as a plain dict)
            assert _is_typeddict(ann), f"{path}: the schema gives it properties; type it with a TypedDict, not {ann}"
            _check(sub, ann, path, seen)
        elif sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            items = _deref(sub["items"])
            assert typing.get_origin(ann) is list, f"{path}: an array; annotated {ann}"
            (item,) = typing.get_args(ann)
            item_values = items.get("enum")
            if item_values is not None:
                assert set(typing.get_args(item)) == set(item_values), f"{path}[]"
            if "properties" in items:
                assert _is_typeddict(item), f"{path}[]: the schema gives its items properties; type them with a TypedDict"
                _check(items, item, f"{path}[]", seen)


def test_the_typed_dicts_follow_the_schema_key_for_key():
    seen: list[str] = []
    _check(SCHEMA, ManifestData, "manifest", seen)
    declared = {name for name, v in vars(manifest_types).items() if _is_typeddict(v) and v.__module__ == manifest_types.__name__}
    assert declared == set(seen), f"TypedDicts the schema walk never reached: {sorted(declared - set(seen))}"


def test_the_check_fails_on_a_key_the_schema_lacks():
    class Extra(manifest_types.FileRef):
        lines: int

    try:
        _check(_local("#/$defs/file_ref"), Extra, "rows", [])
    except AssertionError as exc:
        assert "lines" in str(exc)
    else:
        raise AssertionError("an extra key passed the check")


def test_a_loaded_manifest_has_every_required_key(tmp_path):
    data = load_manifest(make_run(tmp_path / "run")).data
    for key in ManifestData.__required_keys__:
        assert key in data, key
    for key in manifest_types.Training.__required_keys__:
        assert key in data["training"], key
    for key in manifest_types.TinySpec.__required_keys__:
        assert key in data["model"]["tiny"], key
