"""The JSON Schemas in schemas/ are the contract with the controller. They are loaded once, keyed
by `$id`, so a `$ref` to another schema (manifest -> stamp) resolves without a network."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from .host import host

try:  # jsonschema >= 4.18 (the pinned stack)
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012
except ImportError:  # older jsonschema (e.g. Debian's python3-jsonschema 4.10 under CANARY_AUDIT_PYTHON)
    Registry = None  # type: ignore[assignment,misc]

SCHEMA_BASE = "https://canary-audit.dev/schemas/"


def schemas_dir() -> Path:
    env = host().schemas_dir
    if env is not None:
        return env
    return Path(__file__).resolve().parent.parent.parent / "schemas"


@functools.lru_cache(maxsize=None)
def _store(directory: str) -> dict[str, dict]:
    store: dict[str, dict] = {}
    for path in sorted(Path(directory).glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        store[schema.get("$id", SCHEMA_BASE + path.name)] = schema
    return store


def load_schema(name: str) -> dict:
    """`name` is the file stem without `.schema.json`, e.g. "manifest"."""
    store = _store(str(schemas_dir()))
    key = SCHEMA_BASE + f"{name}.schema.json"
    if key not in store:
        raise FileNotFoundError(f"schema {name!r} not found in {schemas_dir()}")
    return store[key]


@functools.lru_cache(maxsize=None)
def _validator(name: str, directory: str) -> Draft202012Validator:
    schema = load_schema(name)
    if Registry is None:
        from jsonschema import RefResolver

        return Draft202012Validator(schema, resolver=RefResolver.from_schema(schema, store=_store(directory)))
    return Draft202012Validator(schema, registry=_registry(directory))


@functools.lru_cache(maxsize=None)
def _registry(directory: str) -> "Registry":
    return Registry().with_resources(
        (uri, Resource.from_contents(schema, default_specification=DRAFT202012)) for uri, schema in _store(directory).items()
    )


def validator(name: str) -> Draft202012Validator:
    return _validator(name, str(schemas_dir()))


def _path_text(error: jsonschema.ValidationError) -> str:
    parts: list[str] = []
    for p in error.absolute_path:
        parts.append(f"[{p}]" if isinstance(p, int) else (f".{p}" if parts else str(p)))
    return "".join(parts) or "(root)"


def _deepest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    # oneOf/anyOf failures carry the informative error in their context; pick the one that got
    # furthest into the document.
    best = error
    for sub in error.context or []:
        cand = _deepest(sub)
        if len(cand.absolute_path) > len(best.absolute_path):
            best = cand
    return best


def first_error(name: str, value: Any) -> str | None:
    """One line naming the field and the problem, or None when `value` is valid."""
    errors = sorted(validator(name).iter_errors(value), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if not errors:
        return None
    err = _deepest(errors[0])
    bad = json.dumps(err.instance)
    if len(bad) > 80:
        bad = bad[:77] + "..."
    return f"field {_path_text(err)}: {err.message if len(err.message) < 160 else err.message[:157] + '...'} (value {bad})"


def validate(name: str, value: Any) -> None:
    """Raise ValueError with a one-line description when `value` does not satisfy schema `name`."""
    problem = first_error(name, value)
    if problem is not None:
        raise ValueError(f"{name}.schema.json: {problem}")


def apply_defaults(schema: dict, instance: Any, root: dict | None = None) -> Any:
    """Fill absent optional properties with the schema's `default`, recursing into present objects
    and array items (local `#/$defs/...` refs are followed). Mutates and returns `instance`."""
    root = root if root is not None else schema
    if "$ref" in schema and schema["$ref"].startswith("#/"):
        target = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part]
        schema = target
    if isinstance(instance, dict):
        for key, sub in schema.get("properties", {}).items():
            if not isinstance(sub, dict):
                continue
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                apply_defaults(sub, instance[key], root)
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for item in instance:
            apply_defaults(schema["items"], item, root)
    return instance
