"""Grading every answer of held-out lines the way greedy generation meets them: a batch of lines is read through the
KV cache as generation reads a prompt, token by token from the first answer on, and each answer token is the model's
greedy choice given the true tokens before it (so a model that peeks at later tokens gains nothing). Exact match
(every token of an answer right, and the line's end after its last answer) and the longest right prefix are then
exactly what greedy generation gives; per-token accuracy counts each token given the true ones before it, as MAD
(Poli et al. 2024) and Zoology (Arora et al. 2023) score, so one early slip does not hide the rest of an answer."""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from gpt.data.tasks import Example, Line
from gpt.data.tasks.datamodule import encode_line
from gpt.data.tokenizers.base import Tokenizer
from gpt.model.gpt import GPT


@dataclass(frozen=True)
class Graded:
    """One answer graded: the model's choice for each of its tokens given the true ones before it, and whether it
    ended the line where the answer is the line's last."""

    example: Example
    predicted: tuple[str, ...]
    right: tuple[bool, ...]
    ended: bool = True  # the line's end was predicted after the last answer (always True for others)

    @property
    def exact(self) -> bool:
        return all(self.right) and self.ended

    @property
    def token(self) -> float:
        return sum(self.right) / len(self.right)

    @property
    def prefix(self) -> int:
        """Answer tokens right before the first wrong one: what greedy generation gets right."""
        return next((i for i, ok in enumerate(self.right) if not ok), len(self.right))

    @property
    def output(self) -> str:
        """What greedy generation writes, as far as teacher forcing knows it: up to and including the first
        wrong token."""
        shown = " ".join(self.predicted[:self.prefix + 1])
        return shown + (" ..." if self.prefix + 1 < len(self.predicted) or not self.ended else "")


@torch.no_grad()
def grade(model: GPT, tokenizer: Tokenizer, lines: Sequence[Line], batch_size: int = 256) -> list[Graded]:
    """Every answer of every line, in batches of lines of similar length (padded after their ends)."""
    encoded = [encode_line(tokenizer, line) for line in lines]
    longest = max((len(ids) - 1 for ids, _, _ in encoded), default=0)  # a row's inputs: every token but the last
    if longest > model.cfg.block_size:  # held-out lines may run past the trained ones (the length task's, 4x)
        raise ValueError(f"these lines run to {longest} tokens, past the model's block_size={model.cfg.block_size}: "
                         f"train it with model.block_size={longest} or more to grade them")
    order = sorted(range(len(lines)), key=lambda i: len(encoded[i][0]))
    was_training = model.training
    model.eval()
    graded: dict[int, list[Graded]] = {}
    for at in range(0, len(order), batch_size):
        chunk = order[at:at + batch_size]
        rows = [encoded[i][0] for i in chunk]
        first = min(encoded[i][2][0][0] for i in chunk)  # the earliest answer token of the batch
        for row, i in zip(choices(model, rows, first), chunk):
            graded[i] = grade_line(lines[i], encoded[i][0], encoded[i][2], row, tokenizer)
    model.train(was_training)
    return [g for i in range(len(lines)) for g in graded[i]]


def choices(model: GPT, rows: list[list[int]], first: int) -> list[list[int | None]]:
    """The model's greedy choice after each position j of each row (predicting row[j + 1]) from position first - 1
    on (None before): the rows up to `first` prefilled into the cache as one prompt, then one true token at a time,
    as generation would feed them."""
    width = max(map(len, rows)) - 1
    device = next(model.parameters()).device
    pad = rows[0][0]  # any id: nothing before a row's end ever sees what follows it
    inputs = torch.tensor([row[:-1] + [pad] * (width + 1 - len(row)) for row in rows], device=device)  # (B, T)
    caches = model.new_caches(len(rows))
    chosen = [model(inputs[:, :first], caches)[:, -1].argmax(-1)]  # (B,): after position first - 1
    for j in range(first, width):
        chosen.append(model(inputs[:, j:j + 1], caches)[:, -1].argmax(-1))
    after = torch.stack(chosen, dim=1).tolist()  # (B, width - first + 1)
    return [[None] * (first - 1) + row for row in after]


def grade_line(line: Line, ids: list[int], spans: list[tuple[int, int]], chosen_after: list[int | None],
               tokenizer: Tokenizer) -> list[Graded]:
    """A line's answers graded from the model's choice after each position (chosen_after[j] predicts ids[j + 1])."""
    graded = []
    for example, (start, end) in zip(line.examples, spans):
        chosen = chosen_after[start - 1:end - 1]
        ended = not example.last or chosen_after[end - 1] == ids[end]  # ids[end] is the newline ending the line
        said = tuple(tokenizer.decode([c]).strip() or repr(tokenizer.decode([c])) for c in chosen)
        graded.append(Graded(example, said, tuple(c == t for c, t in zip(chosen, ids[start:end])), ended))
    return graded


def mean_scores(graded: Iterable[Graded]) -> dict[str, float]:
    """Exact match and per-token accuracy as shares, longest right prefix and answer length in tokens, what a guess
    scores per token and on exact match (where the answers have a chance), and how many answers, over `graded`."""
    graded = list(graded)
    scores = {"exact": statistics.fmean(g.exact for g in graded), "token": statistics.fmean(g.token for g in graded),
              "prefix": statistics.fmean(g.prefix for g in graded),
              "tokens": statistics.fmean(len(g.right) for g in graded), "count": len(graded)}
    guessed = [g for g in graded if g.example.chance is not None]
    if guessed:
        scores["chance"] = statistics.fmean(g.example.chance for g in guessed)
        # Exact match needs every token of an answer: a 16-token copy is guessed whole with chance ** 16, not chance.
        scores["exact_chance"] = statistics.fmean(g.example.chance ** len(g.right) for g in guessed)
    return scores


def scores_by_group(graded: list[Graded], order: Sequence[str] = ()) -> dict[str, dict[str, float]]:
    """mean_scores per group (those in `order` first, in that order, then the others as they first appear), then
    over all answers under "all"."""
    by_group: dict[str, list[Graded]] = {group: [] for group in order}
    for g in graded:
        by_group.setdefault(g.example.group, []).append(g)
    result = {group: mean_scores(marks) for group, marks in by_group.items() if marks}
    if graded:
        result["all"] = mean_scores(graded)
    return result


def scores_by_level(graded: list[Graded]) -> dict[str, dict[int, dict[str, float]]]:
    """mean_scores per task and level (tokens copied, pairs, tokens back), levels in increasing order; tasks
    without levels are left out."""
    by_level: dict[str, dict[int, list[Graded]]] = {}
    for g in graded:
        if g.example.level is not None:
            by_level.setdefault(g.example.task, {}).setdefault(g.example.level, []).append(g)
    return {task: {level: mean_scores(levels[level]) for level in sorted(levels)} for task, levels in by_level.items()}
