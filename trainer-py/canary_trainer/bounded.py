"""One bound on every file the trainer reads from a run folder (manifest, rows, images, result,
checkpoints) and from the shared cache: the file is opened once, without following a final symlink
(O_NOFOLLOW) and without waiting on a FIFO (O_NONBLOCK); fstat of that same handle must show a
regular file of at most `limit` bytes; the bytes then come from that handle, and a file that grows
past the bound while it is read is refused. A check before an open would be two lookups of the same
name (a file swapped in between is read unchecked): here there is one.

A link to /dev/zero, a FIFO, a device or a file over its bound is refused with a phrase
(BoundError, a ValueError) that callers put in their one-line error: `is a symlink…`, `is a FIFO
(named pipe), not a regular file`, `holds N bytes, over the bound of M bytes`.

Bounds: what the writer recorded where it recorded one (an image's `bytes` in the manifest, a
checkpoint file's size in its hashes.json, a cached score file's 4 x n_candidates), else the caps
below, the controller's for the same files (`src/fs/json-file.ts`, `src/report/utility.ts`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# JSON a run folder or the cache holds (manifest.json, result.json, a checkpoint's meta.json and
# hashes.json, cached evaluations): the controller's MAX_JSON_BYTES.
MAX_JSON_BYTES = 256 * 1024 * 1024
# A JSON-lines rows file (training, utility, pretraining rows): the controller's cap on the same files.
MAX_ROWS_BYTES = 1024 * 1024 * 1024
# A checkpoint file whose hashes.json records no size (checkpoints written before sizes were
# recorded): weights and optimizer state of a large full fine-tune are tens of GB.
MAX_CHECKPOINT_FILE_BYTES = 512 * 1024 * 1024 * 1024

_O_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


class BoundError(ValueError):
    """A file refused by its bound; the message is a phrase that follows the file's name."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open_checked(file: Path, limit: int) -> tuple[int, int]:
    """(fd, size): `file` opened once and checked by fstat of the handle; BoundError or OSError."""
    try:
        fd = os.open(file, _O_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symlink (O_NOFOLLOW)
            raise BoundError("is a symlink; run files are regular files the controller or the trainer writes") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BoundError(f"is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise BoundError(f"holds {st.st_size} bytes, over the bound of {limit} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_bounded(file: Path, limit: int) -> bytes:
    """The bytes of `file`, opened once and bounded (see the module): BoundError names why a file
    is refused; OSError when it cannot be opened at all."""
    fd, _ = _open_checked(file, limit)
    try:
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise BoundError(f"grew past the bound of {limit} bytes while it was read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_bounded(file: Path, limit: int = MAX_JSON_BYTES) -> str:
    """read_bounded decoded as UTF-8 (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_bounded(file, limit).decode("utf-8")


class BoundedStream:
    """A read-only binary stream over an open handle that refuses to yield more than `limit` bytes
    in all (torch.load reads a checkpoint through it; a file that grows is refused, not read on)."""

    def __init__(self, handle: BinaryIO, limit: int, size: int) -> None:
        self._handle = handle
        self._limit = limit
        self.size = size  # by fstat of the handle when it was opened

    def read(self, size: int = -1) -> bytes:
        pos = self._handle.tell()
        room = self._limit - pos
        want = room + 1 if size is None or size < 0 else min(size, room + 1)
        data = self._handle.read(max(want, 0))
        if pos + len(data) > self._limit:
            raise BoundError(f"grew past the bound of {self._limit} bytes while it was read")
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readline(self, size: int = -1) -> bytes:
        return self._handle.readline(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True


@contextmanager
def open_bounded(file: Path, limit: int) -> Iterator[BoundedStream]:
    """`file` opened once and bounded (see the module), as a binary stream for readers that take
    one (hashing in blocks, then torch.load from the same handle: no second lookup of the name)."""
    fd, size = _open_checked(file, limit)
    with os.fdopen(fd, "rb") as handle:
        yield BoundedStream(handle, limit, size)
