"""Token shards: fixed-size files of token ids (uint16 when the vocabulary fits, else uint32), written with their
sha256 and read back as one sequence through memory maps, so a corpus of any size costs a shard of memory."""
from __future__ import annotations

import errno
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpt.atomic import atomic_write


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def write_file(path: Path, data: bytes | memoryview) -> None:
    """Write atomically; a failure (a full disk) is one line naming the file, and leaves nothing at `path`."""
    try:
        atomic_write(path, data)
    except OSError as err:
        raise ValueError(f"could not write {path}: {err.strerror or err}; free some disk space (or set "
                         "data.root= to another disk) and run again") from None


class ShardWriter:
    """Appends ids to `<split>_<n>.bin` files of exactly `shard_tokens` ids each (the last may be shorter),
    holding at most one shard in memory."""

    def __init__(self, folder: Path, split: str, shard_tokens: int, dtype: np.dtype) -> None:
        self.folder, self.split, self.dtype = folder, split, dtype
        self.buffer, self.filled, self.shards = np.empty(shard_tokens, dtype), 0, []

    def write(self, ids: np.ndarray) -> None:
        while len(ids):
            take = min(len(ids), len(self.buffer) - self.filled)
            self.buffer[self.filled:self.filled + take] = ids[:take]
            self.filled, ids = self.filled + take, ids[take:]
            if self.filled == len(self.buffer):
                self._flush()

    def _flush(self) -> None:
        if self.filled:
            name = f"{self.split}_{len(self.shards):05d}.bin"
            self.shards.append(save_shard(self.folder / name, self.buffer[:self.filled]))
            self.filled = 0

    def close(self) -> list[dict[str, Any]]:
        self._flush()
        return self.shards


def save_shard(path: Path, ids: np.ndarray) -> dict[str, Any]:
    """Write one shard; its manifest entry records size, checksum and the mtime the reader checks cheaply."""
    data = memoryview(np.ascontiguousarray(ids)).cast("B")  # the ids' bytes, not a copy of them
    write_file(path, data)
    return {"file": path.name, "tokens": len(ids), "sha256": hashlib.sha256(data).hexdigest(),
            "mtime_ns": path.stat().st_mtime_ns}


def check_shard(folder: Path, entry: dict[str, Any], itemsize: int, fix: str) -> None:
    """Refuse a shard that is missing or resized; hash it only when its mtime moved (a start-up that costs no
    reading when nothing changed), and refuse it if the bytes differ from the manifest's sha256. `fix` says how to
    make the corpus again, which depends on who made the folder."""
    path = folder / entry["file"]
    if not path.is_file() or path.stat().st_size != entry["tokens"] * itemsize:
        raise ValueError(f"shard {path} is missing or not the size its manifest records: {fix}")
    if path.stat().st_mtime_ns != entry["mtime_ns"] and file_sha256(path) != entry["sha256"]:
        raise ValueError(f"shard {path} does not match the checksum in its manifest: {fix}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


class TokenShards:
    """A split's shards as one sequence of ids: `len`, and windows gathered across shard boundaries. Given the
    vocabulary's size, every id read is checked against it: a shard changed with its mtime kept skips the checksum
    (check_shard), and an id past the vocabulary would end training in an IndexError from the embedding."""

    def __init__(self, arrays: list[np.ndarray], paths: list[Path] | None = None, vocab_size: int | None = None,
                 fix: str = "") -> None:
        self.arrays, self.paths, self.vocab_size, self.fix = arrays, paths, vocab_size, fix
        self.ends = np.cumsum([len(a) for a in arrays], dtype=np.int64)  # (S,) where each shard stops

    @classmethod
    def open(cls, paths: list[Path], dtype: str, vocab_size: int | None = None, fix: str = "") -> TokenShards:
        try:
            return cls([np.memmap(p, dtype=dtype, mode="r") for p in paths], paths, vocab_size, fix)
        except OSError as err:  # each map holds a file descriptor: a small data.shard_tokens makes too many
            if err.errno != errno.EMFILE:
                raise
            raise ValueError(f"{paths[0].parent}: its {len(paths)} shards are more files than a process may open at "
                             f"once ({err.strerror}): prepare the corpus again with a larger data.shard_tokens "
                             "(--shard-tokens), or raise that limit (ulimit -n)") from None

    def __reduce__(self) -> tuple[Callable[..., TokenShards], tuple[Any, ...]]:
        """Spawned processes (ddp_spawn) map the files again rather than receive copies of the ids."""
        if self.paths is None:
            return TokenShards, (self.arrays, None, self.vocab_size, self.fix)
        return TokenShards.open, (self.paths, str(self.arrays[0].dtype), self.vocab_size, self.fix)

    def check_ids(self, ids: np.ndarray, starts: np.ndarray) -> None:
        """Refuse ids (B, L) read from starts (B,) if one is past the vocabulary, naming the shard it came from.
        One max over the batch: the search for the culprit runs only when there is one."""
        if self.vocab_size is None or not ids.size or int(ids.max()) < self.vocab_size:
            return
        row, column = np.argwhere(ids >= self.vocab_size)[0]
        position = int(starts[row]) + int(column)
        shard = int(np.searchsorted(self.ends, position, side="right"))
        name = f"shard {self.paths[shard]}" if self.paths else f"shard {shard}"
        local = position - (int(self.ends[shard - 1]) if shard else 0)
        raise ValueError(f"{name} holds id {int(ids[row, column])} at token {local:,}, past the vocabulary of "
                         f"{self.vocab_size} its manifest's tokenizer has: it was changed after preparation; "
                         f"{self.fix or 'prepare the corpus again'}")

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def rows(self, starts: np.ndarray, length: int) -> np.ndarray:
        """The ids at starts[i] .. starts[i] + length - 1 as an int64 array (B, length)."""
        out = np.empty((len(starts), length), dtype=np.int64)
        for row, start in enumerate(starts.tolist()):
            done = 0
            while done < length:
                shard = int(np.searchsorted(self.ends, start + done, side="right"))
                local = start + done - (int(self.ends[shard - 1]) if shard else 0)
                piece = self.arrays[shard][local:local + length - done]
                out[row, done:done + len(piece)] = piece
                done += len(piece)
        self.check_ids(out, starts)
        return out

    def to_array(self) -> np.ndarray:
        """All ids in memory: for tests and small corpora only."""
        ids = np.concatenate(self.arrays) if self.arrays else np.empty(0, np.int64)
        self.check_ids(ids[None], np.zeros(1, np.int64))  # (1, N): one row from the start
        return ids
