"""A manifest that lists images: the files checked against their sha256, and refused for a backend
that cannot read them, each in one line naming the field."""

import hashlib

import pytest

from canary_trainer.errors import BadManifest
from canary_trainer.manifest import load_manifest

from .fixtures import make_run, rewrite_manifest

PNG = bytes.fromhex("89504e470d0a1a0a") + b"not really pixels"
SHA = hashlib.sha256(PNG).hexdigest()


def _with_image(tmp_path, *, write=True, bytes_=PNG):
    manifest = make_run(tmp_path)
    if write:
        (tmp_path / "images").mkdir()
        (tmp_path / "images" / f"{SHA}.png").write_bytes(bytes_)

    def edit(m):
        m["images"] = [{"path": f"images/{SHA}.png", "sha256": SHA, "bytes": len(PNG)}]
    return rewrite_manifest(manifest, edit)


def test_text_only_backend_refuses_image_rows(tmp_path):
    with pytest.raises(BadManifest, match=r"field model\.backend: tiny reads text only \(no model\.tiny\.vision\), but the rows show 1 images"):
        load_manifest(_with_image(tmp_path))


def test_missing_image_is_named(tmp_path):
    with pytest.raises(BadManifest, match=r"field images\[0\]: .*images/[0-9a-f]{64}\.png cannot be read"):
        load_manifest(_with_image(tmp_path, write=False))


def test_damaged_image_is_named(tmp_path):
    with pytest.raises(BadManifest, match=r"field images\[0\]\.sha256: .* has sha256 [0-9a-f]{64}, not " + SHA):
        load_manifest(_with_image(tmp_path, bytes_=PNG + b"x"))


def test_manifests_without_images_load(tmp_path):
    assert load_manifest(make_run(tmp_path)).data.get("images") is None
