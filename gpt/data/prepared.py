"""A prepared corpus opened for training: checked against its manifest, the settings a run gives and the corpus a
model or checkpoint trained on. A training run's corpus (`load`) is prepared first by gpt/data/prepare.py when it is
not there yet."""
from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpt.data.prepare import cache_folder, prepare, read_manifest, remake
from gpt.data.recipe import TRAINING_NAMES, Recipe, check_text_field
from gpt.data.shards import TokenShards, check_shard
from gpt.data.tokenizers import tokenizer_from_dict
from gpt.data.tokenizers.base import Tokenizer
from gpt.overrides import as_override, pasted, quoted

# The settings that change what a prepared corpus holds, each with its flag of `python -m gpt prepare`.
PREPARED_SETTINGS = {"val_fraction": "--val-fraction", "text_field": "--text-field", "doc_bytes": "--doc-bytes",
                     "vocab_size": "--vocab-size"}


@dataclass(frozen=True)
class Prepared:
    """A prepared corpus opened for training: its split shards through memory maps and its tokenizer."""
    folder: Path
    manifest: dict[str, Any]
    tokenizer: Tokenizer
    train: TokenShards
    val: TokenShards


def open_prepared(folder: Path, tokenizer: str | None, cached: bool = False) -> Prepared:
    """A prepared corpus, checked against its manifest (shard sizes, and checksums of shards whose mtime moved) and
    against the `tokenizer` a run names (None: a model's, judged by check_prepared_as). `cached`: the folder is
    training's cache, not one the user named."""
    path, fix = folder / "manifest.json", remake(folder, cached)
    manifest = read_manifest(path, fix)
    recipe, splits, dtype = manifest["recipe"], manifest["splits"], np.dtype(manifest["dtype"])
    if tokenizer is not None and recipe["tokenizer"] != tokenizer:
        raise ValueError(f"{path} was prepared with data.tokenizer={quoted(recipe['tokenizer'])}, not "
                         f"{quoted(tokenizer)}: set {pasted('data.tokenizer', recipe['tokenizer'])}, or prepare it "
                         f"again with --tokenizer={shlex.quote(tokenizer)}")
    for entries in splits.values():
        for entry in entries:
            check_shard(folder, entry, dtype.itemsize, fix)
    vocabulary = tokenizer_from_dict(manifest["tokenizer"])
    train, val = (TokenShards.open([folder / e["file"] for e in splits[s]], dtype.name, vocabulary.vocab_size, fix)
                  for s in ("train", "val"))
    return Prepared(folder, manifest, vocabulary, train, val)


def tokenizer_digest(tokenizer: Tokenizer) -> str:
    return hashlib.sha256(json.dumps(tokenizer.to_dict(), sort_keys=True).encode()).hexdigest()


def shards_digest(manifest: dict[str, Any]) -> str:
    """A digest of the shards' bytes, from the sha256 of each that the manifest records (no shard is read)."""
    hashes = {split: [entry["sha256"] for entry in entries] for split, entries in manifest["splits"].items()}
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


def corpus_record(prepared: Prepared) -> dict[str, Any]:
    """What check_prepared_as later checks a folder against: the sizes of the splits, a digest of the tokenizer
    (a few bytes, where a Hugging Face tokenizer's own record is megabytes) and one of the shards."""
    return {"train_tokens": len(prepared.train), "val_tokens": len(prepared.val),
            "tokenizer_sha256": tokenizer_digest(prepared.tokenizer), "shards_sha256": shards_digest(prepared.manifest)}


def check_prepared_as(prepared: Prepared, record: dict[str, Any], who: str, fix: str) -> None:
    """Refuse `prepared` unless it is the corpus `who` (a model, a training checkpoint) trained on, as `record`
    (corpus_record of that corpus; an older model.pt lacks the sizes, an older one or last.ckpt the shards' digest)
    says: a folder prepared again since, with other settings or from other text, has a validation split that holds
    text `who` trained on, or ids that are other tokens to it, or text it never trained on."""
    now = corpus_record(prepared)
    if record["tokenizer_sha256"] != now["tokenizer_sha256"]:
        raise ValueError(f"{prepared.folder} is not the corpus {who} trained on: its tokenizer is another, so its ids "
                         f"are other tokens to the model; {fix}")
    was, has = (record.get("train_tokens"), record.get("val_tokens")), (now["train_tokens"], now["val_tokens"])
    if "val_tokens" in record and has != was:
        raise ValueError(f"{prepared.folder} is not the corpus {who} trained on: it holds {has[0]:,} training and "
                         f"{has[1]:,} validation tokens, that corpus {was[0]:,} and {was[1]:,} (prepared again since, "
                         f"or from other text or settings, its validation split holds text the model trained on); "
                         f"{fix}")
    # Last, so that a split's other size or another tokenizer, which say more, are named first.
    if "shards_sha256" in record and record["shards_sha256"] != now["shards_sha256"]:
        raise ValueError(f"{prepared.folder} is not the corpus {who} trained on: its shards hold other ids than that "
                         f"corpus's (prepared again since from edited text, or cut into shards of another size); "
                         f"{fix}")


def check_settings(recipe: Recipe, folder: Path, manifest: dict[str, Any], given: Collection[str] = ()) -> None:
    """Refuse a setting a run gives that the prepared `folder` was made with otherwise: its shards would be read
    as they are and the setting ignored. A default is taken as not given unless `given` (the settings the command
    line names) holds it, so a folder made with --doc-bytes 256 trains from `data.path=<it>` alone."""
    defaults, made_with = Recipe(), manifest["recipe"]
    for name, flag in PREPARED_SETTINGS.items():
        value = getattr(recipe, name)
        if name == "vocab_size" and recipe.tokenizer != "bpe":  # only a trained BPE reads it
            continue
        if (value != getattr(defaults, name) or name in given) and value != made_with[name]:
            # Prepared with --val, no fraction splits it: --val-fraction alone would pass here and still split nothing.
            val_files = " and without --val (whose files are validation whatever the fraction)" \
                if name == "val_fraction" and made_with["val_inputs"] else ""
            raise ValueError(f"data.{name}={quoted(value)} is not what {folder} was prepared with "
                             f"({name}={quoted(made_with[name])}), and a prepared folder keeps its own: "
                             f"{keep(name, made_with[name])}, or prepare it again with "
                             f"{flag}={shlex.quote(str(value))}{val_files}")
    # Judged by the folder's tokenizer, not its recipe: left unset (null), preparation compacts by what it finds.
    compact = manifest["tokenizer"].get("vocab") is not None
    if recipe.tokenizer == "gpt2" and recipe.compact_vocab is not None and recipe.compact_vocab != compact:
        value = as_override(recipe.compact_vocab)
        has = f"a compact vocabulary of {len(manifest['tokenizer']['vocab']):,} ids" if compact \
            else "GPT-2's full vocabulary"
        raise ValueError(f"data.compact_vocab={value} is not what {folder} was prepared with ({has}), and a prepared "
                         f"folder keeps its own: {keep('compact_vocab', compact)}, or prepare it again with "
                         f"--compact-vocab {value}")


def keep(name: str, made_with: Any) -> str:
    """How a run takes the folder's own value of a data setting: set it, whoever gave the other value (dropping it
    from the command line would leave a preset's, such as experiment=tinystories's data.vocab_size=512)."""
    return f"set {pasted(f'data.{name}', made_with)}"


# Settings that one tokenizer alone reads: the size of the BPE trained, and keeping only the GPT-2 ids a corpus uses.
ONE_TOKENIZERS = {"vocab_size": "bpe", "compact_vocab": "gpt2"}


def load(recipe: Recipe, root: Path, num_proc: int | None = None, given: Collection[str] = ()) -> Prepared:
    """A training run's corpus: an already prepared folder as given (checked against the recipe and the settings
    the command line names, `given`), else the recipe's cache (prepared now if it is not there yet). A setting the
    command line gives that the recipe's tokenizer never reads is refused: the run would ignore it."""
    for name, kind in ONE_TOKENIZERS.items():
        if name in given and recipe.tokenizer != kind:
            value = as_override(getattr(recipe, name))
            raise ValueError(f"data.{name}={value} is read by data.tokenizer={kind} only, and this run has "
                             f"data.tokenizer={recipe.tokenizer}: drop data.{name} (in a sweep whose other jobs read "
                             f"it, give it to all as ++data.{name}={value})")
    if len(recipe.inputs) == 1 and (Path(recipe.inputs[0]) / "manifest.json").is_file():
        if recipe.val_inputs:
            raise ValueError(f"{recipe.inputs[0]} is prepared already, with its own validation split: drop "
                             "data.val_path, or prepare it with --val")
        prepared = open_prepared(Path(recipe.inputs[0]), recipe.tokenizer)
        check_settings(recipe, prepared.folder, prepared.manifest, given)
        return prepared
    if "text_field" in given:
        check_text_field(recipe.inputs, recipe.val_inputs, pasted("data.text_field", recipe.text_field), TRAINING_NAMES)
    return open_prepared(prepare(recipe, cache_folder(recipe, root), num_proc, cached=True), recipe.tokenizer,
                         cached=True)
