"""The failure table (canary_trainer/errors.py): every subclass's kind is one the progress schema
allows, its exit code one of exit_codes.py's, and each keeps the attributes its row gives."""

from __future__ import annotations

from canary_trainer import errors, exit_codes, schemas


def _subclasses() -> list[type[errors.TrainerError]]:
    return [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.TrainerError)
            and c is not errors.TrainerError]


def _error_kinds(node: object) -> set[str]:
    """The enum of the `error` event's `kind`, wherever the progress schema keeps it."""
    if isinstance(node, dict):
        kind = node.get("kind")
        if isinstance(kind, dict) and "bad_manifest" in kind.get("enum", []):
            return set(kind["enum"])
        node = list(node.values())
    if isinstance(node, list):
        for child in node:
            if found := _error_kinds(child):
                return found
    return set()


def test_every_failure_has_a_schema_kind_and_a_known_exit_code():
    kinds = _error_kinds(schemas.load_schema("progress"))
    assert "interrupted" in kinds
    codes = {v for k, v in vars(exit_codes).items() if k.isupper() and isinstance(v, int)}
    table = _subclasses()
    assert len(table) == 9
    for cls in table:
        assert cls.kind in kinds, cls
        assert cls.exit_code in codes, cls
        assert isinstance(cls.recoverable, bool)


def test_a_row_sets_what_an_instance_reports_and_overrides_still_apply():
    e = errors.Interrupted("stopped")
    assert (e.kind, e.exit_code, e.recoverable, e.message) == ("interrupted", exit_codes.INTERRUPTED, True, "stopped")
    d = errors.DiskFull("full")
    assert (d.kind, d.exit_code, d.recoverable) == ("disk_full", exit_codes.FAILURE, False)
    assert errors.BadManifest("x").exit_code == errors.BadRows("y").exit_code == exit_codes.BAD_INPUT
    t = errors.TrainerError("z", recoverable=False)
    assert (t.kind, t.recoverable) == ("internal", False)
