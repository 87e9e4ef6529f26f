"""Corpora as Lightning DataModules. Each exposes `tokenizer`, `vocab_size`, `max_tokens` (the
longest sequence a model needs to see) and `meta` (what model.pt records about the data)."""
from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import chain
from functools import cached_property
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from gpt.data.calculator import OPERATIONS, Problem, split_problems, vocabulary
from gpt.data.download import download
from gpt.data.prepare import Prepared, Recipe, load
from gpt.data.shards import TokenShards
from gpt.data.tokenizers import Tokenizer, WordTokenizer
from gpt.validate import Fraction, PositiveInt

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

    def train_dataloader(self) -> DataLoader:
        self.train_set.place(self.trainer)
        return DataLoader(self.train_set, batch_size=None)

    def val_dataloader(self) -> DataLoader:
        inputs, targets = self.val_set
        batches = [(inputs[i:i + self.batch_size], targets[i:i + self.batch_size])
                   for i in range(0, len(inputs), self.batch_size)]
        return DataLoader(batches, batch_size=None)


class CalculatorData(BatchedData):
    """One problem per row: newline, the problem's words, newline; padded rows whose padding the
    loss ignores, so every token trained on belongs to a whole problem."""

    def __init__(self, seed: int = 0, val_fraction: Fraction = 0.1, test_fraction: Fraction = 0.1,
                 batch_size: PositiveInt = 256, eval_problems: PositiveInt = 500,
                 operations: list[str] | None = None) -> None:
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
    def groups(self) -> list[str]:
        """The columns held-out accuracy is reported under, in order."""
        return self.operations

    example_prompt = "ninety nine plus ninety nine equals"  # what train.py suggests trying with generate.py

    @property
    def eval_examples(self) -> list[Problem]:
        """A fixed, seeded sample of validation problems graded by generation at each validation."""
        val = self.splits["val"]
        return random.Random(self.seed).sample(val, min(self.eval_problem_count, len(val)))

    def _row(self, problem: Problem) -> list[int]:
        return [self.newline, *self.tokenizer.encode(problem.text), self.newline]

    def _tensors(self, problems: list[Problem]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # Every token of a problem is scored: a model that writes problems is what the sample text shows.
        rows = [self._row(p) for p in problems]
        return line_tensors(rows, [[True] * len(row) for row in rows], self.max_tokens, self.newline)

    def setup(self, stage: str | None = None) -> None:
        self.train_set = RowBatches(*self._tensors(self.splits["train"]), self.batch_size, self.seed)
        self.val_set = self._tensors(self.splits["val"])[:2]


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


def resolved(paths: str | list[str]) -> list[str]:
    """A data.path-style setting (one path, or a list of them) as absolute paths."""
    return [str(Path(p).resolve()) for p in ([paths] if isinstance(paths, str) else paths)]


class TextData(BatchedData):
    """Running text: files (text, JSONL, Parquet, Arrow), folders of them, a saved Hugging Face dataset, a folder that
    `python -m gpt prepare` wrote, or a corpus downloaded once from `url` (checked by `sha256`) into
    <root>/<name>/. Prepared once into token shards under <root>/shards/ (gpt/data/prepare.py); a model sees
    random windows of block_size + 1 tokens, and validation a fixed, seeded set of windows.

    The corpus loads on first use (`vocab_size`, `tokenizer`, ...), not in __init__: Hydra's instantiate
    would wrap a user's ValueError (a bad path) into a multi-line InstantiationException."""

    def __init__(self, block_size: PositiveInt, path: str | list[str] | None = None,
                 val_path: str | list[str] | None = None, name: str = "text",
                 url: str | None = None, sha256: str | None = None, tokenizer: str = "char",
                 vocab_size: PositiveInt = 4096, compact_vocab: bool | None = None, val_fraction: Fraction = 0.1,
                 text_field: str = "text", doc_bytes: PositiveInt = 4096, shard_tokens: PositiveInt = 1 << 24,
                 num_proc: PositiveInt | None = None, batch_size: PositiveInt = 64, val_windows: PositiveInt = 512,
                 seed: int = 0, root: str = "data") -> None:
        super().__init__()
        self.path, self.val_path, self.name, self.url = path, val_path, name, url
        self.sha256, self.root = sha256, Path(root)
        self.tokenizer_name, self.num_proc = tokenizer, num_proc
        self.options = dict(tokenizer=tokenizer, vocab_size=vocab_size, compact_vocab=compact_vocab,
                            val_fraction=val_fraction, text_field=text_field, doc_bytes=doc_bytes,
                            shard_tokens=shard_tokens)
        self.block_size, self.batch_size, self.val_windows, self.seed = block_size, batch_size, val_windows, seed
        self.max_tokens = block_size  # every window is exactly one context long

    @cached_property
    def sources(self) -> list[str]:
        if self.path:
            return resolved(self.path)
        if self.url and self.sha256:
            return [str(download(self.url, self.root / self.name / Path(self.url).name, self.sha256).resolve())]
        raise ValueError(f"data={self.name} needs data.path=<a text, JSONL or Parquet file, or a folder of them>")

    @cached_property
    def val_sources(self) -> list[str]:
        return resolved(self.val_path) if self.val_path else []

    @cached_property
    def corpus(self) -> Prepared:
        corpus = load(Recipe(self.sources, self.val_sources, **self.options), self.root, self.num_proc)
        for split, ids in (("training", corpus.train), ("validation", corpus.val)):
            if len(ids) < self.block_size + 1:
                raise ValueError(f"the {split} split of {', '.join(self.sources)} has {len(ids)} {self.tokenizer_name} "
                                 f"tokens, fewer than model.block_size+1={self.block_size + 1}: use more text, or a "
                                 "smaller model.block_size or data.doc_bytes, or another data.val_fraction")
        return corpus

    @property
    def tokenizer(self) -> Tokenizer:
        return self.corpus.tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def meta(self) -> dict[str, Any]:
        return {"corpus": self.name, "path": ", ".join(self.sources),
                "val_path": ", ".join(self.val_sources) or None, "tokenizer": self.tokenizer_name,
                "vocab_size": self.vocab_size, "val_fraction": self.corpus.manifest["recipe"]["val_fraction"],
                "shards": str(self.corpus.folder.resolve()), "train_tokens": len(self.corpus.train),
                "val_tokens": len(self.corpus.val), "seed": self.seed}

    def setup(self, stage: str | None = None) -> None:
        self.train_set = RandomWindows(self.corpus.train, self.block_size, self.batch_size, self.seed)
        # A seed apart from training's, so the fixed validation windows do not mirror the first batches.
        generator = torch.Generator().manual_seed(self.seed + 1)
        starts = torch.randint(len(self.corpus.val) - self.block_size, (self.val_windows,), generator=generator)
        self.val_set = windows(self.corpus.val, starts.numpy(), self.block_size)
