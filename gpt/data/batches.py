"""Batch streams: endless, seeded, resumable sequences of batches that ranks share out (rows of one example each,
or windows of running text), and BatchedData, the DataModule part every corpus shares."""
from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from gpt.data.shards import TokenShards

IGNORE_INDEX = -100  # targets the loss skips: padding after a line ends


class BatchStream(IterableDataset):
    """An endless, seeded sequence of batches that a resumed run re-enters where it stopped and that
    ranks share out: rank r of `world` reads batches start+r, start+r+world, ..."""

    start, rank, world = 0, 0, 1

    def place(self, trainer: L.Trainer | None) -> None:
        """Position from the restored global_step: each optimizer step consumed accumulate_grad_batches
        batches on every rank, so a resumed run reads exactly the batches an uninterrupted one would."""
        if trainer is not None:
            self.start = trainer.global_step * trainer.accumulate_grad_batches * trainer.world_size
            self.rank, self.world = trainer.global_rank, trainer.world_size

    def is_mine(self, index: int) -> bool:
        return index >= self.start and (index - self.start) % self.world == self.rank


class RowBatches(BatchStream):
    """Endless random batches of rows, reshuffled every pass with a seeded generator, each cut to its
    longest row so no compute goes to columns that are padding in every row. Indexing a whole batch
    at once avoids a per-row collate step."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, lengths: torch.Tensor,
                 batch_size: int, seed: int) -> None:
        if batch_size > len(inputs):
            raise ValueError(f"data.batch_size={batch_size} exceeds the {len(inputs)} training rows")
        self.inputs, self.targets, self.lengths = inputs, targets, lengths
        self.batch_size, self.seed = batch_size, seed

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        generator = torch.Generator().manual_seed(self.seed)
        index = 0  # position in the global stream; batches not ours are skipped without indexing
        while True:
            order = torch.randperm(len(self.inputs), generator=generator)
            for i in range(0, len(order) - self.batch_size + 1, self.batch_size):
                if self.is_mine(index):
                    rows = order[i:i + self.batch_size]
                    length = int(self.lengths[rows].max())
                    yield self.inputs[rows, :length], self.targets[rows, :length]
                index += 1


def line_tensors(rows: list[list[int]], scored: list[list[bool]], max_tokens: int,
                 pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One line per row: inputs and targets (N, max_tokens), and each row's unpadded length (N,). Target j is
    row[j + 1] where scored[j + 1] is true, else IGNORE_INDEX, as is all padding after a line ends."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    line = np.repeat(np.arange(len(rows)), lengths)  # (sum of lengths,): each token's row...
    column = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # ...and column
    table = np.full((len(rows), max_tokens + 1), pad, dtype=np.int64)  # (N, T + 1)
    keep = np.zeros((len(rows), max_tokens + 1), dtype=bool)
    table[line, column] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=len(line))
    keep[line, column] = np.fromiter(chain.from_iterable(scored), dtype=bool, count=len(line))
    table, keep = torch.from_numpy(table), torch.from_numpy(keep)
    lengths = torch.from_numpy(lengths - 1)
    # Padding inputs may be any id: the causal mask hides what follows a line.
    return table[:, :-1], torch.where(keep[:, 1:], table[:, 1:], IGNORE_INDEX), lengths


class BatchedData(L.LightningDataModule):
    """What every corpus shares once `setup` has made `train_set` (a BatchStream) and `val_set`
    (inputs and targets, fixed): the endless training stream and validation in fixed batches."""

    train_set: BatchStream
    val_set: tuple[torch.Tensor, torch.Tensor]
    batch_size: int

    @property
    def notes(self) -> list[str]:
        """What a run on this data should know before it trains (none by default)."""
        return []

    def train_dataloader(self) -> DataLoader:
        self.train_set.place(self.trainer)
        return DataLoader(self.train_set, batch_size=None)

    def val_dataloader(self) -> DataLoader:
        inputs, targets = self.val_set
        batches = [(inputs[i:i + self.batch_size], targets[i:i + self.batch_size])
                   for i in range(0, len(inputs), self.batch_size)]
        # Its own generator: iterating a DataLoader draws a seed from the global one otherwise, so each validation
        # moved training's random stream (dropout), which a run resumed from a checkpoint at a validation step
        # does not replay.
        return DataLoader(batches, batch_size=None, generator=torch.Generator())


def windows(tokens: TokenShards, starts: np.ndarray, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets (B, block_size) of the windows of block_size + 1 tokens at `starts`."""
    rows = torch.from_numpy(tokens.rows(starts, block_size + 1))  # (B, T + 1)
    return rows[:, :-1], rows[:, 1:]


class RandomWindows(BatchStream):
    """Endless batches of windows starting anywhere in the tokens, drawn by a seeded generator."""

    def __init__(self, tokens: TokenShards, block_size: int, batch_size: int, seed: int) -> None:
        self.tokens, self.block_size, self.batch_size, self.seed = tokens, block_size, batch_size, seed

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        generator = torch.Generator().manual_seed(self.seed)
        index = 0
        while True:
            starts = torch.randint(len(self.tokens) - self.block_size, (self.batch_size,), generator=generator)
            if self.is_mine(index):
                yield windows(self.tokens, starts.numpy(), self.block_size)
            index += 1
