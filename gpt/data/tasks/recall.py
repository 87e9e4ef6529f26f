"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology"): key-value pairs, then some of the keys
again, each to be answered with its value. Solving it needs an induction head: find the key's earlier place,
copy what followed it."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, words
from gpt.validate import PositiveInt


@dataclass(frozen=True)
class Recall(SampledTask):
    """`k3 v7 k12 v1 ... | k12 v1 k3 v7`: `pairs` pairs with distinct keys, then `queries` of those keys."""

    name: ClassVar[str] = "recall"
    pairs: PositiveInt = 8
    queries: PositiveInt = 8
    keys: PositiveInt = 32
    values: PositiveInt = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pairs > self.keys:
            raise ValueError(f"data.tasks.recall.pairs={self.pairs} exceeds keys={self.keys}: a line's keys "
                             "must differ, so raise data.tasks.recall.keys")
        if self.queries > self.pairs:
            raise ValueError(f"data.tasks.recall.queries={self.queries} exceeds pairs={self.pairs}: each query "
                             "asks a different key")

    def vocabulary(self) -> list[str]:
        return [*words("k", self.keys), *words("v", self.values), "|"]

    def draw(self, rng: random.Random, split: str) -> Line:
        keys = rng.sample(range(self.keys), self.pairs)
        values = [rng.randrange(self.values) for _ in keys]
        context = " ".join(f"k{k} v{v}" for k, v in zip(keys, values))
        asked = rng.sample(range(self.pairs), self.queries)
        turns = [(f"k{keys[i]}", f"v{values[i]}") for i in asked]
        turns[0] = (f"{context} | {turns[0][0]}", turns[0][1])
        return Line(tuple(turns), self.name)
