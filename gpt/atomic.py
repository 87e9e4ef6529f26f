"""Crash-safe writes, the one way tinygpt writes a file that something later reads (model.pt, last.ckpt, shards,
manifests, downloads, run records): into a temporary file beside it, flushed to disk, then renamed over it. A process
killed at any moment leaves the old file or the new one, never a torn one, and two writers never share a temporary."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def file_mode() -> int:
    """The permissions open() gives a new file under this process's umask (0o644 under the usual 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_open(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write `path`'s new content into; it takes `path`'s place only if the block ends without
    an exception, and is removed otherwise."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        os.chmod(tmp, file_mode())  # mkstemp makes it private; the file gets the permissions open() would give
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the rename must not reach the disk before the bytes do
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: str | Path, data: bytes | memoryview) -> None:
    with atomic_open(path) as f:
        f.write(data)
