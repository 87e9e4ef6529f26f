"""`python -m gpt evaluate`: a model graded on every answer of its task's held-out lines (exact match, per-token
accuracy and longest right prefix per group: an operation, a pair count, a distance bucket, a range of lengths), or,
for a model of running text, its loss and bits per byte on its corpus's validation split, and with --lengths its
loss per evaluation length and position past the length it trained on.

    python -m gpt evaluate --ckpt outputs/<date>/<time>/model.pt [--split test]
    python -m gpt evaluate --ckpt <a text model> --lengths 64 128 256 512"""
from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

import numpy as np

from gpt.data.prepared import check_prepared_as, open_prepared, tokenizer_digest
from gpt.data.recipe import Recipe
from gpt.data.tasks.base import doubling
from gpt.data.tasks.datamodule import held_out, repeats_note
from gpt.data.tasks.spec import build_tasks
from gpt.evaluation.bpb import byte_counts, text_loss
from gpt.evaluation.extrapolation import check_length, loss_by_position
from gpt.evaluation.grading import grade, scores_by_group
from gpt.inference.checkpoint import DEVICE_HELP, corpus_of, model_file, newest_checkpoint
from gpt.inference.text import TextModel, load
from gpt.overrides import path_argument


def prepare_again(meta: dict[str, Any]) -> str:
    """The command that prepares a text model's corpus again where its model.pt says it was, with the settings the
    model.pt records (not its --doc-bytes or --text-field)."""
    folder = meta["shards"]
    # A run on a folder prepared with --out records that folder as its path: the inputs it was made from are unknown.
    if meta["path"] == folder:
        inputs = "<the inputs it was prepared from>"
    else:
        inputs = " ".join(map(path_argument, meta["path"].split(", ")))  # the recorded path joins them so
    flags = ["--tokenizer", shlex.quote(meta["tokenizer"])]
    if meta["tokenizer"] == "bpe":
        flags += ["--vocab-size", str(meta["vocab_size"])]
    if meta.get("val_path"):
        flags = ["--val", *map(path_argument, meta["val_path"].split(", ")), *flags]
    elif meta["val_fraction"] != Recipe().val_fraction:
        flags = ["--val-fraction", str(meta["val_fraction"]), *flags]
    return f"python -m gpt prepare {inputs} {' '.join([*flags, '--out', path_argument(folder)])}"


def val_ids(text_model: TextModel) -> np.ndarray:
    """The validation split of the prepared corpus (its shards) a running-text model was trained on, refused when
    the folder there was prepared again since (with other settings, or from other text): its split would hold text
    the model trained on, or ids that are other tokens to the model."""
    meta = text_model.meta
    if not Path(meta["shards"]).exists():  # open_prepared would say to delete it
        raise ValueError(f"{meta['shards']}, the prepared corpus this model trained on, is gone: prepare it there "
                         f"again to measure the model on its validation text: {prepare_again(meta)} (with the "
                         "--doc-bytes and --text-field it was prepared with, where not the defaults)")
    # The folder's own tokenizer, whatever its name: check_prepared_as refuses one other than the model's, naming the
    # fix for a model (the name check advises data.tokenizer=, a training setting).
    prepared = open_prepared(Path(meta["shards"]), None)
    check_prepared_as(prepared, {**meta, "tokenizer_sha256": tokenizer_digest(text_model.tokenizer)}, "this model",
                      "prepare the text it trained on there again, with the settings it had, to measure it on its "
                      "own validation text")
    return prepared.val.to_array()


def text_report(text_model: TextModel, ids: np.ndarray) -> str:
    """Loss per token and bits per byte over the validation split `ids`, every token after the first predicted once
    (training validated on random windows of it)."""
    meta = text_model.meta
    loss, bpb = text_loss(text_model.model, ids, byte_counts(text_model.tokenizer))
    tokens = f"{len(ids):,} {meta['tokenizer']} tokens"
    text = meta["val_path"] if meta.get("val_path") else f"val split of {meta['path']}"  # data.val_path: all of it
    return f"{text} ({tokens}): loss {loss:.4f}, bpb {bpb:.4f}"


def lengths_report(text_model: TextModel, ids: np.ndarray, lengths: list[int]) -> list[str]:
    """Loss at each evaluation length, and in ranges of positions that double from the trained length, so the
    positions past it show apart (a model that extrapolates keeps its loss flat there)."""
    trained = text_model.model.cfg.block_size
    lines = []
    for length in sorted(lengths):
        losses, count = loss_by_position(text_model.model, ids, length)
        ranges = ", ".join(f"{lo}-{hi - 1}: {float(losses[lo:hi].mean()):.4f}" for lo, hi in doubling(trained, length))
        lines.append(f"  {length:>6} tokens ({count} windows): loss {float(losses.mean()):.4f}; by position {ranges}")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt", help="model.pt (or its run folder) to grade (default: the newest under outputs/ "
                                       "or multirun/)")
    parser.add_argument("--split", choices=["val", "test"],
                        help="held-out split of a task model's lines (default: test); running text has val only")
    parser.add_argument("--seed", type=int, help="data.seed the model was trained with, for a model.pt that does "
                                                 "not record it (default: from model.pt)")
    parser.add_argument("--device", default="cpu", help=DEVICE_HELP)
    parser.add_argument("--lengths", type=int, nargs="+", metavar="N",
                        help="text models: loss at these evaluation lengths and per position, past the trained "
                             "block too where the positional encoding allows (learned positions do not)")


def run(args: argparse.Namespace) -> None:
    """`python -m gpt evaluate`: every answer of held-out lines graded per group, or a text model's loss and bpb
    (and with --lengths, its loss at each length and by position)."""
    if args.lengths and min(args.lengths) < 1:
        raise ValueError(f"--lengths {min(args.lengths)}: an evaluation length is a number of tokens, at least 1")
    path = model_file(args.ckpt or newest_checkpoint())
    text_model = load(path, device=args.device, purpose="to evaluate")
    meta = text_model.meta  # model.pt records the DataModule's meta: corpus, seed and split fractions
    if not text_model.line_based and "shards" in meta:  # running text: its loss and bits per byte instead
        if args.split == "test":
            raise ValueError("a text corpus is split into train and val only, and evaluate measures its val split: "
                             "drop --split test")
        if args.seed is not None:  # the text's split is its prepared folder's, whatever the seed
            raise ValueError("--seed picks a task model's lines; a text model's val split is its prepared corpus's: "
                             "drop --seed")
        # Every length is checked before the report: a refusal came after the val split was scored and printed.
        ids = val_ids(text_model)
        for length in args.lengths or []:
            check_length(text_model.model, length, len(ids))
        print(f"{path}: {text_report(text_model, ids)}")
        if args.lengths:
            print(f"loss by evaluation length (trained at {text_model.model.cfg.block_size} tokens):")
            print("\n".join(lengths_report(text_model, ids, args.lengths)))
        return
    if args.lengths:
        raise ValueError("--lengths scores running text at longer lengths; a task model is graded per length by its "
                         "task (data=length): drop --lengths")
    if "tasks" not in meta:
        raise ValueError(f"{path} was trained on {corpus_of(meta)}, which has no right "
                         "answers to grade; python -m gpt evaluate grades models of a task (data=calculator, recall, "
                         "copy, distance, length, tasks) and measures text models trained on prepared shards")
    if args.seed is None and "seed" not in meta:
        raise ValueError("model.pt does not say which data.seed it was trained with; pass --seed")
    args.split = args.split or "test"
    if args.seed is not None and "seed" in meta and args.seed != meta["seed"]:
        raise ValueError(f"--seed {args.seed} is not the data.seed={meta['seed']} this model was trained with: "
                         f"that split's {args.split} examples would include its training data; drop --seed")
    seed = meta.get("seed", args.seed)
    lines = held_out({**meta, "seed": seed}, args.split)
    graded = grade(text_model.model, text_model.tokenizer, lines)
    scores = scores_by_group(graded, order=[g for task in build_tasks(meta["tasks"]) for g in task.groups()])
    print(f"{path}: {len(graded)} answers of {len(lines)} {args.split} lines, data.seed={seed}")
    if note := repeats_note(lines, args.split):
        print(f"note: {note}")
    # Each accuracy beside what a guess scores on it: a whole answer of n tokens is guessed with chance ** n, so
    # the per-token chance beside exact match read as a bar a 16-token copy had to clear.
    print(f"  {'group':>14}  {'exact match':>11}  {'chance':>6}  {'per token':>9}  {'chance':>6}  {'prefix':>6}  "
          "answers")
    for group, s in scores.items():
        exact, token = (f"{100 * s[key]:5.1f}%" if key in s else "     —" for key in ("exact_chance", "chance"))
        print(f"  {group:>14}  {100 * s['exact']:10.2f}%  {exact}  {100 * s['token']:8.2f}%  {token}  "
              f"{s['prefix']:6.2f}  {s['count']}")
