"""Corpora as Lightning DataModules. Each exposes `tokenizer`, `vocab_size`, `max_tokens` (the
longest sequence a model needs to see) and `meta` (what model.pt records about the data)."""
from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from gpt.calculator import OPERATIONS, Problem, split_problems, vocabulary
from gpt.tokenizers import WordTokenizer

IGNORE_INDEX = -100  # targets the loss skips: padding after a line ends


def stream_position(trainer: L.Trainer | None) -> tuple[int, int, int]:
    """(batches all ranks have consumed, this rank, number of ranks) for an endless training stream.
    Derived from the restored global_step, so a resumed run reads exactly the batches an uninterrupted
    one would; each optimizer step consumes accumulate_grad_batches batches on every rank."""
    if trainer is None:
        return 0, 0, 1
    return (trainer.global_step * trainer.accumulate_grad_batches * trainer.world_size,
            trainer.global_rank, trainer.world_size)


class RowBatches(IterableDataset):
    """Endless random batches of rows, reshuffled every pass with a seeded generator, each cut to its
    longest row so no compute goes to columns that are padding in every row. Indexing a whole batch
    at once avoids a per-row collate step. The stream is one seeded sequence: rank r of `world` reads
    batches start+r, start+r+world, ... (see stream_position)."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, lengths: torch.Tensor,
                 batch_size: int, seed: int) -> None:
        if batch_size > len(inputs):
            raise ValueError(f"data.batch_size={batch_size} exceeds the {len(inputs)} training rows")
        self.inputs, self.targets, self.lengths = inputs, targets, lengths
        self.batch_size, self.seed = batch_size, seed
        self.start, self.rank, self.world = 0, 0, 1

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        generator = torch.Generator().manual_seed(self.seed)
        index = 0  # position in the global stream; batches before `start` are skipped without indexing
        while True:
            order = torch.randperm(len(self.inputs), generator=generator)
            for i in range(0, len(order) - self.batch_size + 1, self.batch_size):
                if index >= self.start and (index - self.start) % self.world == self.rank:
                    rows = order[i:i + self.batch_size]
                    length = int(self.lengths[rows].max())
                    yield self.inputs[rows, :length], self.targets[rows, :length]
                index += 1


class CalculatorData(L.LightningDataModule):
    """One problem per row: newline, the problem's words, newline; padded rows whose padding the
    loss ignores, so every token trained on belongs to a whole problem."""

    def __init__(self, seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.1,
                 batch_size: int = 256, eval_problems: int = 500, operations: list[str] | None = None) -> None:
        super().__init__()
        self.seed, self.batch_size, self.eval_problem_count = seed, batch_size, eval_problems
        self.fractions = (val_fraction, test_fraction)
        self.operations = list(operations or OPERATIONS)
        unknown = sorted(set(self.operations) - set(OPERATIONS))
        if unknown:
            raise ValueError(f"data.operations has unknown {unknown}; choose from {list(OPERATIONS)}")
        self.splits = {name: [p for p in problems if p.op in self.operations]
                       for name, problems in split_problems(seed, val_fraction, test_fraction).items()}
        self.tokenizer = WordTokenizer(vocabulary())
        self.vocab_size = self.tokenizer.vocab_size
        self.newline = self.tokenizer.encode("\n")[0]
        self.max_tokens = max(len(self._row(p)) for split in self.splits.values() for p in split) - 1

    @property
    def meta(self) -> dict[str, Any]:
        return {"corpus": "calculator", "one_example_per_line": True, "seed": self.seed, "val_fraction": self.fractions[0],
                "test_fraction": self.fractions[1], "operations": self.operations}

    @property
    def eval_problems(self) -> list[Problem]:
        """A fixed, seeded sample of validation problems graded by generation at each validation."""
        val = self.splits["val"]
        return random.Random(self.seed).sample(val, min(self.eval_problem_count, len(val)))

    def _row(self, problem: Problem) -> list[int]:
        return [self.newline, *self.tokenizer.encode(problem.text), self.newline]

    def _tensors(self, problems: list[Problem]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Inputs and targets (N, max_tokens), padded, and each row's unpadded length (N,)."""
        rows = torch.full((len(problems), self.max_tokens + 1), IGNORE_INDEX, dtype=torch.long)
        lengths = torch.empty(len(problems), dtype=torch.long)
        for i, problem in enumerate(problems):
            ids = self._row(problem)
            rows[i, :len(ids)] = torch.tensor(ids)
            lengths[i] = len(ids) - 1
        inputs = rows[:, :-1].clone()
        inputs[inputs == IGNORE_INDEX] = self.newline  # any id works: the causal mask hides what follows a line
        return inputs, rows[:, 1:], lengths

    def setup(self, stage: str | None = None) -> None:
        self.train_set = RowBatches(*self._tensors(self.splits["train"]), self.batch_size, self.seed)
        self.val_set = self._tensors(self.splits["val"])[:2]

    def train_dataloader(self) -> DataLoader:
        self.train_set.start, self.train_set.rank, self.train_set.world = stream_position(self.trainer)
        return DataLoader(self.train_set, batch_size=None)

    def val_dataloader(self) -> DataLoader:
        inputs, targets = self.val_set
        batches = [(inputs[i:i + self.batch_size], targets[i:i + self.batch_size])
                   for i in range(0, len(inputs), self.batch_size)]
        return DataLoader(batches, batch_size=None)
