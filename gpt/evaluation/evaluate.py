"""Grade a model by real greedy generation on held-out examples: prompt with each example's prompt
("<a> <op> <b> equals", an attention task's question), decode to the end of the line through the text API,
compare with its target.
A model of running text gets its loss and bits per byte on its corpus's validation split instead.

    python -m gpt evaluate --ckpt outputs/<date>/<time>/model.pt [--split test]"""
from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpt.data.calculator import OPERATIONS, split_problems
from gpt.data.prepare import open_prepared
from gpt.data.tasks import TASKS
from gpt.evaluation.bpb import byte_counts, text_loss
from gpt.inference.checkpoint import CheckpointError, model_file, newest_checkpoint
from gpt.inference.text import TextModel, load


class Example(Protocol):
    """Anything gradable: the prompt, the exact completion expected, and the column it is reported under
    (an operation, a distance bucket, an evaluation length)."""

    prompt: str
    target: str
    group: str


@dataclass
class Graded:
    example: Example
    output: str

    @property
    def correct(self) -> bool:
        return self.output == self.example.target


def grade(text_model: TextModel, examples: Sequence[Example], batch_size: int = 512) -> list[Graded]:
    """Greedy-decode every example's completion through the text API (line start, stop at end of line)."""
    longest = max((len(text_model.tokenizer.encode(e.target)) for e in examples), default=0)
    # One token beyond the longest target, so an answer that runs on is graded wrong rather than cut to fit.
    outputs = text_model.complete_batch([e.prompt for e in examples], longest + 1, batch_size)
    return [Graded(e, out) for e, out in zip(examples, outputs)]


def accuracy_by_group(graded: list[Graded], order: Sequence[str] = ()) -> dict[str, float]:
    """Exact-match accuracy per group (those in `order` first, in that order, then the others as they first
    appear), then over all examples."""
    by_group: dict[str, list[bool]] = {group: [] for group in order}
    for g in graded:
        by_group.setdefault(g.example.group, []).append(g.correct)
    result = {group: sum(marks) / len(marks) for group, marks in by_group.items() if marks}
    result["all"] = sum(g.correct for g in graded) / max(len(graded), 1)
    return result


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


def calculator_examples(meta: dict[str, Any], seed: int, split: str) -> list[Example]:
    problems = split_problems(seed, meta.get("val_fraction", 0.1), meta.get("test_fraction", 0.1))[split]
    return [p for p in problems if p.op in meta.get("operations", OPERATIONS)]


TASK_LINES = 1000  # held-out lines graded per attention task


def task_examples(meta: dict[str, Any], seed: int, split: str) -> list[Example]:
    """An attention-task model's held-out lines, regenerated from the task knobs model.pt records."""
    from gpt.data.tasks.datamodule import held_out_examples

    return held_out_examples({**meta, "seed": seed}, split, TASK_LINES)


# The corpora this command can grade: model.pt's meta["corpus"] -> its held-out examples of a split.
HELD_OUT: dict[str, Callable[[dict[str, Any], int, str], list[Example]]] = {
    "calculator": calculator_examples, **dict.fromkeys([*TASKS, "tasks"], task_examples)}


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
    corpus = meta.get("corpus")
    if corpus not in HELD_OUT:
        raise ValueError(f"{path} was trained on {corpus or 'an unrecorded corpus'}, which has no right answers "
                         f"to grade; gpt evaluate grades models of: {', '.join(HELD_OUT)} (and measures text "
                         "models trained on prepared shards)")
    if args.seed is None and "seed" not in meta:
        raise ValueError("model.pt does not say which data.seed it was trained with; pass --seed")
    if args.seed is not None and "seed" in meta and args.seed != meta["seed"]:
        raise ValueError(f"--seed {args.seed} is not the data.seed={meta['seed']} this model was trained with: "
                         f"that split's {args.split} examples would include its training data; drop --seed")
    seed = meta.get("seed", args.seed)
    examples = HELD_OUT[corpus](meta, seed, args.split)
    graded = grade(text_model, examples)
    accuracy = accuracy_by_group(graded, order=OPERATIONS)
    total = Counter(g.example.group for g in graded) + Counter(all=len(graded))
    right = Counter(g.example.group for g in graded if g.correct) + Counter(all=sum(g.correct for g in graded))
    print(f"{path}: {len(examples)} {args.split} examples, data.seed={seed}")
    for group, value in accuracy.items():
        print(f"  {group:>14}: {100 * value:6.2f}%  ({right[group]} of {total[group]})")
