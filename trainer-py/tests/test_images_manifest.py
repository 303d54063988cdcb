"""A manifest that lists images: the files checked against their sha256, and refused for a backend
that cannot read them, each in one line naming the field."""

import hashlib
import os
import struct
import subprocess
import zlib

import pytest

from canary_trainer.errors import BadManifest, BadRows
from canary_trainer.images import DEFAULT_MAX_PIXELS, decode_image, header_size, read_image_file
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
        load_manifest(_with_image(tmp_path, bytes_=PNG[:-1] + b"x"))


def test_longer_image_is_refused_before_it_is_read(tmp_path):
    # The manifest records each file's size: a longer file is not read, let alone hashed.
    with pytest.raises(BadManifest, match=rf"field images\[0\]: .*{SHA}\.png holds {len(PNG) + 1} bytes, over the "
                       rf"bound of {len(PNG)} bytes; not read"):
        load_manifest(_with_image(tmp_path, bytes_=PNG + b"x"))


def _swap_image(tmp_path, make):
    manifest = _with_image(tmp_path)
    file = tmp_path / "images" / f"{SHA}.png"
    file.unlink()
    make(file)
    return manifest


def test_image_linked_to_dev_zero_is_refused_unread(tmp_path):
    # Before: read whole before its hash was checked (OOM-killed at 20 GB).
    manifest = _swap_image(tmp_path, lambda f: f.symlink_to("/dev/zero"))
    with pytest.raises(BadManifest, match=r"field images\[0\]: .*\.png is a symlink; run files are regular files"):
        load_manifest(manifest)


def test_image_fifo_is_refused_without_waiting(tmp_path):
    # Before: the read waited for a writer forever. Guard: a writer opens it after 5 s, so a
    # regression ends (and fails on the message) instead of hanging the suite.
    manifest = _swap_image(tmp_path, lambda f: os.mkfifo(f))
    guard = subprocess.Popen(["sh", "-c", 'sleep 5; : > "$1"', "guard", str(tmp_path / "images" / f"{SHA}.png")])
    try:
        with pytest.raises(BadManifest, match=r"field images\[0\]: .*\.png is a FIFO \(named pipe\), not a regular file"):
            load_manifest(manifest)
    finally:
        guard.kill()
        guard.wait()


def _png(width: int, height: int, idat: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return bytes.fromhex("89504e470d0a1a0a") + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_header_over_the_pixel_cap_is_refused_before_decoding(tmp_path):
    # A hundred-byte PNG whose header says 20000x20000, and a zlib bomb (81 MB of rows in ~80 kB):
    # refused from the header, naming the file and the cap, before PIL inflates anything.
    small = _png(20000, 20000, zlib.compress(bytes(40_000)))
    bomb = _png(9000, 9000, zlib.compress(bytes(9001 * 9000), 9))
    assert len(small) < 200 and len(bomb) < 200_000
    for name, raw in (("small", small), ("bomb", bomb)):
        (tmp_path / f"{name}.png").write_bytes(raw)
        with pytest.raises(BadRows, match=rf"{name}\.png: not a readable image \(its PNG header says \d+x\d+ = \d+ pixels "
                           rf"\(\d+ bytes decoded\), over the cap of {DEFAULT_MAX_PIXELS} pixels; not decoded\)"):
            read_image_file(tmp_path, f"{name}.png")
    with pytest.raises(ValueError, match="over the cap of 100 pixels"):
        decode_image(_png(20, 20, zlib.compress(bytes(21 * 20))), full=False, max_pixels=100)
    # SOI, an APP0 segment, then SOF0: height 480, width 640.
    jpeg = bytes([0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 17, 8, 0x01, 0xE0, 0x02, 0x80, 3])
    assert header_size(jpeg) == ("JPEG", 640, 480)


def test_backend_read_refuses_a_link_and_a_fifo(tmp_path):
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    with pytest.raises(BadRows, match=r"zero\.png: not a readable image \(is a symlink"):
        read_image_file(tmp_path, "zero.png")
    os.mkfifo(tmp_path / "pipe.png")
    with pytest.raises(BadRows, match=r"pipe\.png: not a readable image \(is a FIFO"):
        read_image_file(tmp_path, "pipe.png")


def test_manifests_without_images_load(tmp_path):
    assert load_manifest(make_run(tmp_path)).data.get("images") is None
