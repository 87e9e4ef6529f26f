"""Grade a model by real greedy generation on held-out examples: prompt with each example's prompt
("<a> <op> <b> equals"), decode to the end of the line through the text API, compare with its target.

    python -m gpt.evaluate --ckpt outputs/<date>/<time>/model.pt [--split test]"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gpt.calculator import OPERATIONS, split_problems
from gpt.checkpoint import CheckpointError, newest_checkpoint
from gpt.text import TextModel, load


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


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description="Exact-match accuracy on held-out calculator problems.")
    parser.add_argument("--ckpt", help="model.pt to grade (default: the newest under outputs/)")
    parser.add_argument("--split", choices=["val", "test"], default="test")
    parser.add_argument("--seed", type=int, help="data.seed the model was trained with (default: from model.pt)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        path = args.ckpt or newest_checkpoint()
        text_model = load(path, device=args.device)
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    data = text_model.meta  # model.pt records the DataModule's meta: seed and split fractions
    if args.seed is None and "seed" not in data:
        print("error: model.pt does not say which data.seed it was trained with; pass --seed", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else data["seed"]
    problems = split_problems(seed, data.get("val_fraction", 0.1), data.get("test_fraction", 0.1))[args.split]
    problems = [p for p in problems if p.op in data.get("operations", OPERATIONS)]
    accuracy = accuracy_by_group(grade(text_model, problems), order=OPERATIONS)
    print(f"{path}: {len(problems)} {args.split} problems, data.seed={seed}")
    for op, value in accuracy.items():
        print(f"  {op:>10}: {100 * value:6.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
