"""Retrieval at a distance: key-value facts among blank filler, then a question `? k5` answered by the value
of a fact exactly d tokens back. d is drawn evenly over buckets that double in width (1-8, 9-16, 17-32, ...),
and accuracy is reported per bucket, so an attention that cannot reach d tokens shows as a cliff."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, words
from gpt.data.tasks.copy import BLANK
from gpt.validate import PositiveInt


@dataclass(frozen=True)
class Distance(SampledTask):
    """`_ k4 v9 _ _ k5 v3 _ ... _ ? k5` -> `v3`: `context` tokens holding `facts` facts with distinct keys;
    d counts the tokens strictly between the asked fact's value and the question's key (`?` included)."""

    name: ClassVar[str] = "distance"
    context: PositiveInt = 32
    facts: PositiveInt = 4
    keys: PositiveInt = 32
    values: PositiveInt = 32
    first_bucket: PositiveInt = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.context <= self.first_bucket:
            raise ValueError(f"data.tasks.distance.context={self.context} must exceed first_bucket="
                             f"{self.first_bucket}: the facts are placed up to context tokens back")
        if self.facts > min(self.keys, self.context // 4):
            raise ValueError(f"data.tasks.distance.facts={self.facts} is too many: at most keys and context/4 "
                             f"({min(self.keys, self.context // 4)}) fit")

    def buckets(self) -> list[tuple[int, int]]:
        """(lo, hi]: d ranges, doubling from first_bucket; the last ends where the context does (d < context)."""
        edges = [0, self.first_bucket]
        while edges[-1] < self.context - 1:
            edges.append(min(2 * edges[-1], self.context - 1))
        return list(zip(edges, edges[1:]))

    def groups(self) -> list[str]:
        return [f"distance_{lo + 1}_{hi}" for lo, hi in self.buckets()]

    def vocabulary(self) -> list[str]:
        return [*words("k", self.keys), *words("v", self.values), BLANK, "?"]

    def draw(self, rng: random.Random, split: str) -> Line:
        lo, hi = rng.choice(self.buckets())
        d = rng.randint(lo + 1, hi)
        slots = [BLANK] * self.context
        keys = rng.sample(range(self.keys), self.facts)
        values = [rng.randrange(self.values) for _ in keys]
        value_at = self.context - d  # the question's key sits at context + 1
        taken = {value_at - 1, value_at}
        starts = [value_at - 1]
        while len(starts) < self.facts:  # distractor facts anywhere else, never overlapping
            start = rng.randrange(self.context - 1)
            if not {start, start + 1} & taken:
                taken |= {start, start + 1}
                starts.append(start)
        for start, key, value in zip(starts, keys, values):
            slots[start], slots[start + 1] = f"k{key}", f"v{value}"
        return Line(((" ".join(slots) + f" ? k{keys[0]}", f"v{values[0]}"),), f"distance_{lo + 1}_{hi}")
