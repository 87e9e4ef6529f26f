"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology"): key-value pairs, then keys again, each to be
answered with its value. Solving it needs an induction head: find the key's earlier place, copy what followed it.
Lines may mix pair counts, every answer is scored and each pair count is its own column, so how much a fixed-size
state can hold shows as accuracy falling with the pairs."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, Turn, words
from gpt.validate import PositiveInt, check_once


@dataclass(frozen=True)
class Recall(SampledTask):
    """`k3 v7 k12 v1 ... | k12 v1 k3 v7`: `pairs` pairs with distinct keys, then `queries` of those keys (None: every
    key, in a random order). A tuple of pair counts mixes them, each line drawing one; answers are graded under
    recall_<pairs>."""

    name: ClassVar[str] = "recall"
    level: ClassVar[str | None] = "key-value pairs in the line"
    pairs: PositiveInt | tuple[PositiveInt, ...] = 8
    queries: PositiveInt | None = None  # None: every key is asked
    keys: PositiveInt = 32
    values: PositiveInt = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.counts:
            raise ValueError("data.tasks.recall.pairs=[] names no pair count: give one, such as 8, or a list such as "
                             "[4,8,16]")
        check_once("data.tasks.recall.pairs", self.counts, "pair count")
        if max(self.counts) > self.keys:
            raise ValueError(f"data.tasks.recall.pairs={max(self.counts)} exceeds keys={self.keys}: a line's keys "
                             "must differ, so raise data.tasks.recall.keys")
        if self.queries is not None and self.queries > min(self.counts):
            raise ValueError(f"data.tasks.recall.queries={self.queries} exceeds pairs={min(self.counts)}: each query "
                             "asks a different key (null asks every key)")

    @property
    def counts(self) -> tuple[int, ...]:
        """The pair counts lines draw from."""
        return (self.pairs,) if isinstance(self.pairs, int) else tuple(self.pairs)

    def vocabulary(self) -> list[str]:
        return [*words("k", self.keys), *words("v", self.values), "|"]

    def groups(self) -> list[str]:
        return [f"recall_{count}" for count in self.counts]

    def draw(self, rng: random.Random, split: str) -> Line:
        count = rng.choice(self.counts)
        keys = rng.sample(range(self.keys), count)
        values = [rng.randrange(self.values) for _ in keys]
        context = " ".join(f"k{k} v{v}" for k, v in zip(keys, values))
        asked = rng.sample(range(count), self.queries or count)
        # A guess among the values of the keys not asked yet (elimination, no key matched) gets one of these right.
        chance = [1 / len({values[i] for i in range(count) if i not in asked[:j]}) for j in range(len(asked))]
        turns = [Turn(f"k{keys[i]}", f"v{values[i]}", f"recall_{count}", count, c) for i, c in zip(asked, chance)]
        turns[0] = replace(turns[0], given=f"{context} | {turns[0].given}")
        return Line(self.name, tuple(turns))
