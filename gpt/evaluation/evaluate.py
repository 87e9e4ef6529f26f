"""`python -m gpt evaluate`: a model graded by real greedy generation on its task's held-out examples (exact match
per group: an operation, a distance bucket, an evaluation length), or, for a model of running text, its loss and
bits per byte on its corpus's validation split.

    python -m gpt evaluate --ckpt outputs/<date>/<time>/model.pt [--split test]"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from gpt.data.prepare import open_prepared
from gpt.data.tasks.datamodule import build_tasks, held_out_examples
from gpt.evaluation.bpb import byte_counts, text_loss
from gpt.evaluation.grading import accuracy_by_group, grade
from gpt.inference.checkpoint import model_file, newest_checkpoint
from gpt.inference.text import TextModel, load


def text_report(text_model: TextModel) -> str:
    """Loss per token and bits per byte over the validation split of the prepared corpus (its shards) a
    running-text model was trained on, every token after the first predicted once (training validated on
    random windows of it)."""
    meta = text_model.meta
    ids = open_prepared(Path(meta["shards"]), meta["tokenizer"]).val.to_array()
    loss, bpb = text_loss(text_model.model, ids, byte_counts(text_model.tokenizer))
    tokens = f"{len(ids):,} {meta['tokenizer']} tokens"
    text = meta["val_path"] if meta.get("val_path") else f"val split of {meta['path']}"  # data.val_path: all of it
    return f"{text} ({tokens}): loss {loss:.4f}, bpb {bpb:.4f}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt", help="model.pt (or its run folder) to grade (default: the newest under outputs/)")
    parser.add_argument("--split", choices=["val", "test"], default="test")
    parser.add_argument("--seed", type=int, help="data.seed the model was trained with, for a model.pt that does "
                                                 "not record it (default: from model.pt)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:<index> or mps (default: cpu)")


def run(args: argparse.Namespace) -> None:
    """`python -m gpt evaluate`: exact match per group on held-out examples, or a text model's loss and bpb."""
    path = model_file(args.ckpt or newest_checkpoint())
    text_model = load(path, device=args.device)
    meta = text_model.meta  # model.pt records the DataModule's meta: corpus, seed and split fractions
    if not text_model.line_based and "shards" in meta:  # running text: its loss and bits per byte instead
        print(f"{path}: {text_report(text_model)}")
        return
    if "tasks" not in meta:
        raise ValueError(f"{path} was trained on {meta.get('corpus', 'an unrecorded corpus')}, which has no right "
                         "answers to grade; python -m gpt evaluate grades models of a task (data=calculator, recall, "
                         "copy, distance, length, tasks) and measures text models trained on prepared shards")
    if args.seed is None and "seed" not in meta:
        raise ValueError("model.pt does not say which data.seed it was trained with; pass --seed")
    if args.seed is not None and "seed" in meta and args.seed != meta["seed"]:
        raise ValueError(f"--seed {args.seed} is not the data.seed={meta['seed']} this model was trained with: "
                         f"that split's {args.split} examples would include its training data; drop --seed")
    seed = meta.get("seed", args.seed)
    examples = held_out_examples({**meta, "seed": seed}, args.split)
    graded = grade(text_model, examples)
    accuracy = accuracy_by_group(graded, order=[g for task in build_tasks(meta["tasks"]) for g in task.groups()])
    total = Counter(g.example.group for g in graded) + Counter(all=len(graded))
    right = Counter(g.example.group for g in graded if g.correct) + Counter(all=sum(g.correct for g in graded))
    print(f"{path}: {len(examples)} {args.split} examples, data.seed={seed}")
    for group, value in accuracy.items():
        print(f"  {group:>14}: {100 * value:6.2f}%  ({right[group]} of {total[group]})")
