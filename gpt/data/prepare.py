"""Corpus preparation: stream documents from the inputs, learn the tokenizer, encode in parallel processes and write
fixed-size token shards plus a manifest; the same inputs and recipe give byte-identical shards whatever the number of
processes. Run by `python -m gpt prepare` (prepare_command.py) or a training run's first use (prepared.py's load)."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpt.data.formats import FORMATS, fingerprint, format_of
from gpt.data.pool import ordered_map
from gpt.data.recipe import Recipe, split_files
from gpt.data.shards import ShardWriter, save_shard, token_dtype, write_file
from gpt.data.tokenizers import learn_tokenizer, tokenizer_label
from gpt.data.workers import VALIDATION_INPUTS_RULE, VALIDATION_RULE, Source, Work, encode
from gpt.overrides import path_argument

# Bump when the shard layout, the manifest, the cut rule, the split rule, what a text file reads as or the ids a
# tokenizer gives change (2: the manifest's sha256; 3: Windows line endings and byte order mark; 4: a long document's
# pieces measured with each \r\n as one byte; 5: the end-of-text of a file's last document cut at its last line break;
# 6: the word tokenizer's combining marks and ’ inside words, a folder tokenizer's special tokens spelled in text read
# as text).
VERSION = 6


def build(recipe: Recipe, folder: Path, num_proc: int, progress: bool | None = None) -> dict[str, Any]:
    """Write the shards and the manifest of `recipe` into `folder` (which the caller makes appear atomically)."""
    train_files, val_files = split_files(recipe.inputs, recipe.val_inputs)
    inputs = _fingerprints(recipe)  # as read: a file still being written is refused below, not recorded as done
    # The tokenizer learns from both, as nanoGPT's char vocabulary does: validation text must encode.
    units = [unit for path in [*train_files, *val_files]
             for unit in FORMATS[format_of(path)].units(path, recipe.doc_bytes, recipe.text_field)]
    work = Work(recipe, frozenset(str(path) for path in val_files))
    tokenizer = learn_tokenizer(recipe.tokenizer, Source(units, work, num_proc, progress), recipe.vocab_size)
    source = Source(units, replace(work, tokenizer=tokenizer), num_proc, progress)
    dtype = token_dtype(tokenizer.vocab_size)
    writers = {split: ShardWriter(folder, split, recipe.shard_tokens, dtype) for split in ("train", "val")}
    narrow = getattr(tokenizer, "compact", None)  # gpt2 keeps only the ids the corpus uses
    occurs, documents = np.zeros(tokenizer.vocab_size, bool), 0

    def stats(result: tuple[np.ndarray, np.ndarray, int, np.ndarray]) -> dict[str, int]:
        return {"documents": result[2], "tokens": len(result[0]) + len(result[1])}

    for train, val, docs, present in source.run(encode, "encoding", stats):
        writers["train"].write(train)
        writers["val"].write(val)
        documents += docs
        occurs |= present
    splits = {split: writer.close() for split, writer in writers.items()}
    used = np.flatnonzero(occurs)
    if narrow is not None and (recipe.compact_vocab or (recipe.compact_vocab is None
                                                        and len(used) < tokenizer.vocab_size // 2)):
        tokenizer = narrow(used.tolist())
        _renumber(folder, splits, used, len(occurs), dtype, num_proc)
    if not any(entries for entries in splits.values()):
        raise ValueError(f"no text in {', '.join(recipe.inputs)}: the corpus is empty")
    if (now := _fingerprints(recipe)) != inputs:  # its shards would hold some of its text, as done
        changed = sorted({row[0] for row in {tuple(row) for row in inputs} ^ {tuple(row) for row in now}})
        raise ValueError(f"{', '.join(changed)} changed while it was being prepared (a download or copy still being "
                         "written?): run again once it is complete")
    manifest = {"version": VERSION, "recipe": asdict(recipe), "tokenizer": tokenizer.to_dict(),
                "dtype": dtype.name, "eot_id": tokenizer.eot_id, "documents": documents,
                "inputs": inputs,
                "validation": VALIDATION_INPUTS_RULE if recipe.val_inputs else VALIDATION_RULE,
                "splits": splits}
    write_file(folder / "manifest.json", json.dumps({**manifest, "sha256": _digest(manifest)}, indent=1).encode())
    return manifest


def _digest(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


def remake(folder: Path, cached: bool) -> str:
    """How to replace a damaged prepared corpus. Preparation never overwrites a folder, so first delete it; a run
    then prepares its own cache (`cached`) again, but a folder named with --out is for the user to prepare again."""
    if cached:
        return f"delete {folder} and run again to prepare the corpus afresh"
    return f"delete {folder} and prepare it again (python -m gpt prepare <inputs> --out {path_argument(folder)})"


def read_manifest(path: Path, fix: str) -> dict[str, Any]:
    """A manifest as preparation wrote it, or one line saying why not (and then `fix`): missing, unreadable, of
    another version, or changed since it was written (its sha256 covers everything else in it)."""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{path} is missing or not a tinygpt manifest: {fix}") from None
    if not isinstance(manifest, dict) or manifest.get("version") != VERSION:
        raise ValueError(f"{path} is from another version of tinygpt's shard format: {fix}")
    if manifest.pop("sha256", None) != _digest(manifest):
        raise ValueError(f"{path} was changed after preparation wrote it (it does not match its sha256): {fix}")
    return manifest


def _renumber(folder: Path, splits: dict[str, list[dict[str, Any]]], used: np.ndarray, vocab_size: int,
              dtype: np.dtype, num_proc: int) -> None:
    """Rewrite each shard with id used[i] as i (a compact vocabulary), shards in parallel, updating the manifest."""
    lookup = np.zeros(vocab_size, dtype)
    lookup[used] = np.arange(len(used))
    entries = [entry for split in splits.values() for entry in split]
    with ordered_map(_renumber_shard, lookup, num_proc, len(entries)) as mapper:
        for entry, saved in zip(entries, mapper([folder / entry["file"] for entry in entries])):
            entry.update(saved)


def _renumber_shard(lookup: np.ndarray, path: Path) -> dict[str, Any]:
    return save_shard(path, lookup[np.fromfile(path, lookup.dtype)])


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """One preparer per output at a time (DDP ranks, two runs): the others wait, then find it prepared."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a file where a folder must be, a folder we may not write
        raise ValueError(f"cannot prepare into {out}: {err.strerror} ({err.filename}); point --out or --root "
                         "(data.root in training) at a folder") from None
    path = out.parent / f".{out.name}.lock"
    try:
        lock = open(path, "w")
    except OSError as err:  # a folder made in its place, a file we may not write
        raise ValueError(f"cannot open the preparation lock {path}: {err.strerror}; delete it (it holds nothing: the "
                         "next preparation makes it again)") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def prepare(recipe: Recipe, out: Path, num_proc: int | None = None, progress: bool | None = None,
            cached: bool = False) -> Path:
    """Prepare into a temporary folder beside `out` and rename it into place once the manifest is written:
    a killed or failed run leaves nothing at `out`, and its leftovers are removed by the next one. `cached`: `out`
    is training's cache folder, not one the user named."""
    with _locked(out):
        if (out / "manifest.json").is_file():
            manifest = read_manifest(out / "manifest.json", remake(out, cached))
            if manifest.get("recipe") != asdict(recipe) or manifest.get("inputs") != _fingerprints(recipe):
                raise ValueError(f"{out} holds a corpus prepared from other inputs or settings: delete it or "
                                 "choose another --out")
            return out
        if out.exists():
            # A training run's cache names no --out: a manifest deleted by hand, or a folder copied in part. A folder
            # named with --out holds what the user put there (a preparation leaves nothing there unless whole).
            fix = remake(out, cached) if cached else "choose another --out, a folder that does not exist yet"
            raise ValueError(f"{out} exists and is not a prepared corpus (no manifest.json): {fix}")
        for stale in out.parent.glob(f".{out.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # from a preparer that died (we hold the lock)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        tmp.mkdir()
        try:
            build(recipe, tmp, num_proc or len(os.sched_getaffinity(0)), progress)
            os.rename(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _fingerprints(recipe: Recipe) -> list[list[str | int]]:
    train_files, val_files = split_files(recipe.inputs, recipe.val_inputs)
    return [row for path in [*train_files, *val_files] for row in fingerprint(path)]


def cache_folder(recipe: Recipe, root: Path) -> Path:
    """Where training keeps a recipe's shards: keyed by the inputs' paths, sizes and mtimes, so finding a
    prepared corpus reads none of its text, whatever its size."""
    label = tokenizer_label(recipe.tokenizer)
    key = json.dumps({"version": VERSION, "recipe": asdict(recipe), "inputs": _fingerprints(recipe), "label": label},
                     sort_keys=True)
    return root / "shards" / f"{label}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
