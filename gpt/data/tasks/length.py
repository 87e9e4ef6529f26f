"""Length generalisation (Press et al. 2022, ALiBi; Kazemnejad et al. 2023, NoPE): copying trained on sequences
of 1 to `trained` tokens and graded at `trained`, 2x and 4x that, one column per length. Copying is solvable at
any length, so what fails past the trained length is the positional encoding, not the task."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, words
from gpt.data.tasks.copy import copy_line
from gpt.validate import PositiveInt

FACTORS = (1, 2, 4)  # graded lengths, as multiples of the longest trained length


@dataclass(frozen=True)
class Length(SampledTask):
    """Training lines copy 1..`trained` tokens from `vocab`; held-out lines copy exactly trained x FACTORS."""

    name: ClassVar[str] = "length"
    trained: PositiveInt = 8
    vocab: PositiveInt = 16

    def vocabulary(self) -> list[str]:
        return [*words("t", self.vocab), "="]

    def groups(self) -> list[str]:
        return [f"length_{self.trained * f}" for f in FACTORS]

    def draw(self, rng: random.Random, split: str) -> Line:
        count = rng.randint(1, self.trained) if split == "train" else self.trained * rng.choice(FACTORS)
        tokens = [f"t{rng.randrange(self.vocab)}" for _ in range(count)]
        return copy_line(rng, tokens, 0, f"length_{count}" if split != "train" else self.name)
