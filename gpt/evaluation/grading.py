"""Grading by real greedy generation: prompt with each held-out example's prompt ("<a> <op> <b> equals", an
attention task's question), decode to the end of the line through the text API, compare with its target."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpt.data.tasks import Example
from gpt.inference.text import TextModel

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
