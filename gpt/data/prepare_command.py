"""`python -m gpt prepare <inputs> ...`: prepare a corpus into token shards (gpt/data/prepare.py), then say what
it holds and how to train on it."""
from __future__ import annotations

import argparse
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpt.data.notes import input_notes, prepared_notes
from gpt.data.prepare import cache_folder, prepare
from gpt.data.prepared import open_prepared
from gpt.data.recipe import Names, Recipe, check_text_field, split_files
from gpt.data.tokenizers.learned import TOKENIZERS
from gpt.overrides import command_line
from gpt.validate import positive_int

COMMAND_NAMES = Names("{}", "--val {}", "the inputs and --val")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Recipe()
    parser.add_argument("inputs", nargs="+", help="text/JSONL/Parquet files, folders of them, or a saved dataset")
    parser.add_argument("--tokenizer", default=defaults.tokenizer,
                        help=f"{', '.join(TOKENIZERS)}, or a Hugging Face model folder (its own tokenizer)")
    parser.add_argument("--vocab-size", type=int, default=defaults.vocab_size, help="bpe: trained vocabulary size")
    parser.add_argument("--compact-vocab", choices=["true", "false"], default=None,
                        help="gpt2: keep only the ids the corpus uses (default: when that is under half of them)")
    parser.add_argument("--val-fraction", type=float, default=defaults.val_fraction)
    parser.add_argument("--val", nargs="+", default=[], metavar="INPUT",
                        help="validate on all of these instead (the inputs then all train; --val-fraction unused)")
    parser.add_argument("--text-field", default=defaults.text_field, help="JSONL key / Parquet or dataset column")
    parser.add_argument("--doc-bytes", type=int, default=defaults.doc_bytes)
    parser.add_argument("--shard-tokens", type=int, default=defaults.shard_tokens)
    parser.add_argument("--num-proc", type=positive_int, default=None, help="processes (default: every core)")
    parser.add_argument("--root", default="data", help="training's data.root: the shards go to <root>/shards/")
    parser.add_argument("--out", default=None, help="prepare into this folder instead (train with data.path=<it>)")


def run(args: argparse.Namespace) -> None:
    """`python -m gpt prepare`: prepare the inputs, then say how to train on them."""
    defaults = Recipe()
    split_files(args.inputs, args.val, COMMAND_NAMES)  # a mistake named as typed here, before training's names
    if args.text_field != defaults.text_field:
        check_text_field(args.inputs, args.val, f"--text-field {shlex.quote(args.text_field)}", COMMAND_NAMES)
    if args.compact_vocab is not None and args.tokenizer != "gpt2":  # stored in the manifest, it would do nothing
        raise ValueError(f"--compact-vocab {args.compact_vocab} keeps only the GPT-2 ids a corpus uses; --tokenizer "
                         f"{args.tokenizer} is not compacted: drop --compact-vocab")
    if args.vocab_size != defaults.vocab_size and args.tokenizer != "bpe":  # the train command printed would be refused
        raise ValueError(f"--vocab-size {args.vocab_size} sizes the BPE trained on a corpus; --tokenizer "
                         f"{args.tokenizer} trains none: drop --vocab-size")
    compact = None if args.compact_vocab is None else args.compact_vocab == "true"
    recipe = Recipe([str(Path(p).resolve()) for p in args.inputs], [str(Path(p).resolve()) for p in args.val],
                    args.tokenizer, args.vocab_size, compact, args.val_fraction, args.text_field, args.doc_bytes,
                    args.shard_tokens)
    out = Path(args.out) if args.out else cache_folder(recipe, Path(args.root))
    cached = not args.out
    prepared = open_prepared(prepare(recipe, out, args.num_proc, True, cached), recipe.tokenizer, cached)
    again = "delete it and prepare it again" if args.out else "prepare it again"  # --out is never overwritten
    # The train command printed below would be refused for an empty split.
    if recipe.val_inputs and not (len(prepared.train) and len(prepared.val)):
        split, named = ("training", args.inputs) if not len(prepared.train) else ("validation", args.val)
        raise ValueError(f"{out}: its {split} split is empty, as {', '.join(named)} holds no text (files of no text, "
                         f"or of empty documents only): {again} with text there")
    if not len(prepared.val) or not len(prepared.train):
        documents = prepared.manifest["documents"]
        fell, fraction = ("no part", "larger") if not len(prepared.val) else ("every part", "smaller")
        raise ValueError(f"{out}: {fell} of its {documents:,} document{'s' * (documents != 1)} fell in the "
                         "validation split (each document, or ~--doc-bytes piece of a long one, goes there by the "
                         f"hash of its text with chance --val-fraction): {again} with a smaller --doc-bytes "
                         f"than {recipe.doc_bytes} or a {fraction} --val-fraction than {recipe.val_fraction}, or name "
                         "validation files with --val")
    # Absolute, as the inputs are: the command may be run from another folder, and a relative --out or --root read
    # from there would find nothing and prepare the corpus again.
    paths = str(out.resolve()) if args.out else recipe.inputs if len(recipe.inputs) > 1 else recipe.inputs[0]
    settings: dict[str, Any] = {"path": paths, "tokenizer": recipe.tokenizer}
    if not args.out:  # the settings the run's lookup must see again; a prepared folder carries its own
        settings.update((k, v) for k, v in asdict(recipe).items()
                        if k not in ("inputs", "val_inputs") and v != getattr(defaults, k))
        if recipe.val_inputs:
            settings["val_path"] = recipe.val_inputs
        # The run looks for its shards under <data.root>/shards/, data/ of the folder it starts in unless named.
        settings["root"] = str(Path(args.root).resolve())
    # Quoted for Hydra and the shell: a path with a space, a quote or an = is pasted whole, and one with a comma is
    # not read as a sweep (or, in a list, as two paths).
    command = command_line("python", "train.py", "data=text", overrides={f"data.{k}": v for k, v in settings.items()})
    print(f"{out}: {prepared.manifest['documents']:,} documents, {len(prepared.train):,} training and "
          f"{len(prepared.val):,} validation tokens, vocabulary {prepared.tokenizer.vocab_size:,}")
    for note in [*input_notes(args.inputs, args.val, COMMAND_NAMES), *prepared_notes(prepared)]:
        print(f"note: {note}")
    print(f"train with: {command}")
