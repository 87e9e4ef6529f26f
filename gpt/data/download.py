"""Corpora fetched from the web: download once, verify by sha256, write atomically. Preparing text into
token shards is gpt/data/prepare.py's."""
from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from pathlib import Path

from gpt.atomic import atomic_write
from gpt.data.shards import file_sha256


def download(url: str, path: Path, sha256: str) -> Path:
    """Fetch `url` into `path` once, refusing (and not keeping) bytes whose sha256 differs. The copy fetched before is
    checked again: one changed since (edited, cut short, damaged on disk) would be prepared and trained on as this
    corpus."""
    if path.is_file():
        if file_sha256(path) != sha256:
            raise ValueError(f"{path} does not match the sha256 of {url}: it changed after it was downloaded; delete "
                             "it to download it again")
        return path
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            data = response.read()
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ValueError(f"could not download {url} ({reason}); offline? pass data.path=<a local copy>") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ValueError(f"checksum mismatch for {url}: sha256 {actual}, expected {sha256}; nothing was saved "
                         "(retry, or pass data.path=<a trusted copy>)")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return path
