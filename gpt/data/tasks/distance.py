"""Retrieval at a distance, multi-query: key-value facts among blank filler and questions `? k5` among them, each
answered by the value of the fact d tokens back. Each line asks one question per bucket of d (1-8, 9-16, 17-32,
33-64: doubling), every answer is scored, and accuracy is reported per bucket, so an attention that cannot reach d
tokens shows as a cliff where its reach ends."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, Turn, doubling, words
from gpt.data.tasks.copy import BLANK
from gpt.validate import NonNegativeInt, PositiveInt

PLACEMENT_TRIES = 100  # draws of a question's place before the line is drawn again


@dataclass(frozen=True)
class Distance(SampledTask):
    """`_ k4 v9 _ _ k5 v3 _ ? k4 v9 _ ... ? k5 v3`: up to `length` tokens holding `queries` facts that questions
    ask (each bucket of d in turn) and `distractors` facts none asks, keys all different; d counts the tokens
    strictly between the asked fact's value and the question's key (`?` included). The line ends with its last
    answer."""

    name: ClassVar[str] = "distance"
    level: ClassVar[str | None] = "tokens back (d)"
    length: PositiveInt = 80
    queries: PositiveInt = 4
    distractors: NonNegativeInt = 2
    keys: PositiveInt = 32
    values: PositiveInt = 32
    first_bucket: PositiveInt = 8
    farthest: PositiveInt = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.farthest < self.first_bucket:
            raise ValueError(f"data.tasks.distance.farthest={self.farthest} is below first_bucket={self.first_bucket}:"
                             " raise data.tasks.distance.farthest")
        if self.length < self.farthest + 4:
            raise ValueError(f"data.tasks.distance.length={self.length} cannot hold a question {self.farthest} tokens "
                             f"after its fact: make it at least farthest + 4 = {self.farthest + 4}")
        if self.queries + self.distractors > self.keys:
            raise ValueError(f"data.tasks.distance: queries + distractors = {self.queries + self.distractors} facts "
                             f"need as many different keys; raise data.tasks.distance.keys above {self.keys}")
        if 5 * self.queries + 2 * self.distractors > self.length // 2:
            raise ValueError(f"data.tasks.distance: {self.queries} questions and {self.distractors} distractors "
                             f"crowd a line of {self.length} tokens; use fewer or raise data.tasks.distance.length")

    def buckets(self) -> list[tuple[int, int]]:
        """(lo, hi] ranges of d, doubling from first_bucket up to farthest."""
        return doubling(self.first_bucket, self.farthest)

    def groups(self) -> list[str]:
        return [f"distance_{lo + 1}_{hi}" for lo, hi in self.buckets()]

    def vocabulary(self) -> list[str]:
        return [*words("k", self.keys), *words("v", self.values), BLANK, "?"]

    def draw(self, rng: random.Random, split: str) -> Line:
        while True:
            line = self.try_draw(rng)
            if line is not None:
                return line

    def try_draw(self, rng: random.Random) -> Line | None:
        """A line, or None when the questions drawn did not all fit."""
        buckets = self.buckets()
        order = [b for _ in range(-(-self.queries // len(buckets))) for b in rng.sample(buckets, len(buckets))]
        keys = rng.sample(range(self.keys), self.queries + self.distractors)
        values = [rng.randrange(self.values) for _ in keys]
        slots, questions = [BLANK] * self.length, []
        for key, value, (lo, hi) in zip(keys, values, order[:self.queries]):
            for _ in range(PLACEMENT_TRIES):
                d = rng.randint(lo + 1, hi)
                ask = rng.randint(d + 1, self.length - 3)  # `?` here, the key after it, then the answer
                fact = ask - d - 1  # the fact's key; its value follows, d tokens before the question's key
                if all(slots[i] == BLANK for i in (fact, fact + 1, ask, ask + 1, ask + 2)):
                    break
            else:
                return None
            slots[fact:fact + 2], slots[ask:ask + 3] = [f"k{key}", f"v{value}"], ["?", f"k{key}", f"v{value}"]
            questions.append((ask, d, f"distance_{lo + 1}_{hi}", key))
        for key, value in zip(keys[self.queries:], values[self.queries:]):
            free = [i for i in range(self.length - 1) if slots[i] == slots[i + 1] == BLANK]
            if not free:
                return None
            start = rng.choice(free)
            slots[start:start + 2] = [f"k{key}", f"v{value}"]
        keyed = [(i, slots[i], slots[i + 1]) for i in range(self.length - 1) if slots[i][0] == "k"]  # facts, asked keys
        turns, given_from, asked = [], 0, set()
        for ask, d, group, key in sorted(questions):
            # A guess among the values of the facts before the question not asked yet (no key matched).
            facts = {value for i, word, value in keyed if i < ask and word not in asked}
            turns.append(Turn(" ".join(slots[given_from:ask + 2]), slots[ask + 2], group, d, 1 / len(facts)))
            given_from, asked = ask + 3, asked | {f"k{key}"}
        return Line(self.name, tuple(turns))
