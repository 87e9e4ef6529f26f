"""Text corpora on disk: download-and-verify, reading UTF-8 files or folders, the train/val split,
and the token cache (a numpy file per text hash and tokenizer, written atomically)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpt.tokenizers import Tokenizer, fit_tokenizer, tokenizer_from_dict, tokenizer_label

CACHE_VERSION = 1  # bump when the cache layout or the tokenization rules change


def _atomic_write(path: Path, data: bytes) -> None:
    """Write beside `path`, then rename over it: a killed process leaves the old file or none, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def download(url: str, path: Path, sha256: str) -> Path:
    """Fetch `url` into `path` once, refusing (and not keeping) bytes whose sha256 differs."""
    if path.is_file():
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
    _atomic_write(path, data)
    return path


def text_files(path: Path) -> list[Path]:
    """A file, or every *.txt in a folder (sorted, so the corpus and its hash are reproducible)."""
    if not path.exists():
        raise ValueError(f"data.path={path} does not exist: point it at a UTF-8 text file or a folder of *.txt")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.glob("*.txt") if p.is_file())
    if not files:
        raise ValueError(f"data.path={path} is a folder with no *.txt files: add some or point at a text file")
    return files


def read_text(files: list[Path]) -> str:
    """The files' UTF-8 text, one document after another, each ending with a newline."""
    docs = []
    for file in files:
        raw = file.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{file} is not UTF-8: byte 0x{raw[err.start]:02x} at byte offset {err.start} "
                             "(convert it, e.g. iconv -f latin1 -t utf-8)") from None
        docs.append(text if text.endswith("\n") or not text else text + "\n")
    text = "".join(docs)
    if not text.strip():
        raise ValueError(f"no text in {', '.join(map(str, files))}: the corpus is empty")
    return text


def split_text(text: str, val_fraction: float) -> tuple[str, str]:
    """Train and val text, cut at the line boundary nearest to the last `val_fraction` of the text so
    no line is shared (a single-line text is cut where it must be)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"data.val_fraction={val_fraction} must be between 0 and 1 (exclusive)")
    target = round(len(text) * (1 - val_fraction))
    after, before = text.find("\n", target), text.rfind("\n", 0, target)
    candidates = [i + 1 for i in (after, before) if 0 <= i < len(text) - 1]
    cut = min(candidates, key=lambda i: abs(i - target)) if candidates else target
    return text[:cut], text[cut:]


@dataclass(frozen=True)
class Tokens:
    """A tokenized corpus: train ids then val ids in one read-only array, and their tokenizer."""
    tokens: np.ndarray
    train_tokens: int
    tokenizer: Tokenizer

    @property
    def train(self) -> np.ndarray:
        return self.tokens[:self.train_tokens]

    @property
    def val(self) -> np.ndarray:
        return self.tokens[self.train_tokens:]


def tokenize(train: str, val: str, tokenizer_name: str, compact: bool | None) -> Tokens:
    """Fit the tokenizer on the whole text, encode each split on its own (no token straddles the cut),
    and narrow GPT-2 to the ids used when asked (None: when they are under half of its vocabulary)."""
    tokenizer = fit_tokenizer(tokenizer_name, train + val)
    train_ids = tokenizer.encode(train)
    ids = np.array(train_ids + tokenizer.encode(val), dtype=np.int64)
    narrow = getattr(tokenizer, "compact", None)  # char and word vocabularies are built dense already
    if narrow is not None:
        used = np.unique(ids)
        if compact or (compact is None and len(used) < tokenizer.vocab_size // 2):
            tokenizer = narrow(used.tolist())
            ids = np.searchsorted(used, ids)  # BPE id -> its rank among the used ids = its compact id
    dtype = np.uint16 if tokenizer.vocab_size <= 2**16 else np.uint32
    return Tokens(ids.astype(dtype), len(train_ids), tokenizer)


def cached_tokens(text: str, val_fraction: float, tokenizer_name: str, compact: bool | None,
                  cache_dir: Path) -> Tokens:
    """Tokens of `text`, from `cache_dir` when this text, split and tokenizer were tokenized before.

    The ids go to <key>.npy and the tokenizer and split to <key>.json, each written atomically, the
    json last: it marks a complete entry, so an interrupted run leaves nothing that would be read."""
    label = tokenizer_label(tokenizer_name)  # refuses a name that is neither a kind nor a tokenizer folder
    recipe = {"version": CACHE_VERSION, "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
              "val_fraction": val_fraction, "tokenizer": label, "compact": compact}
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:20]
    ids_path, info_path = cache_dir / f"{label}-{key}.npy", cache_dir / f"{label}-{key}.json"
    if info_path.is_file() and ids_path.is_file():
        try:
            info, ids = json.loads(info_path.read_text()), np.load(ids_path, mmap_mode="r")
            if info["recipe"] == recipe and len(ids) == info["tokens"]:
                return Tokens(ids, info["train_tokens"], tokenizer_from_dict(info["tokenizer"]))
        except (ValueError, KeyError, OSError):  # damaged from outside (we write atomically): tokenize afresh
            pass
    result = tokenize(*split_text(text, val_fraction), tokenizer_name, compact)
    cache_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.save(buffer, result.tokens)
    _atomic_write(ids_path, buffer.getvalue())
    info = {"recipe": recipe, "tokens": len(result.tokens), "train_tokens": result.train_tokens,
            "tokenizer": result.tokenizer.to_dict()}
    _atomic_write(info_path, json.dumps(info).encode())
    return Tokens(np.load(ids_path, mmap_mode="r"), result.train_tokens, result.tokenizer)
