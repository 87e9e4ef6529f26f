"""Length generalisation (Press et al. 2022, ALiBi; Kazemnejad et al. 2023, NoPE; Ruoss et al. 2023): copying
trained on sequences of 1 to `trained` tokens and graded at every length up to 4x that, exact match, per-token
accuracy and longest correct prefix per length, in columns of doubling lengths. Copying is solvable at any
length (with unique tokens, by one rule), so what fails past the trained length is the positional encoding."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, doubling, words
from gpt.data.tasks.copy import check_unique, copy_line, draw_tokens
from gpt.validate import PositiveInt

LONGEST = 4  # held-out lines copy up to this many times the longest trained sequence


@dataclass(frozen=True)
class Length(SampledTask):
    """Training lines copy 1..`trained` tokens from `vocab` (all different if `unique`); held-out lines copy
    1..4 x `trained`, graded under length_1_<trained>, then columns that double up to 4 x `trained`."""

    name: ClassVar[str] = "length"
    level: ClassVar[str | None] = "tokens copied"
    runs_alone: ClassVar[bool] = True  # other tasks' lines would train positions past `trained`
    trained: PositiveInt = 8
    vocab: PositiveInt = 16
    unique: bool = False  # tokens drawn without replacement: needs vocab >= 4 x trained

    def __post_init__(self) -> None:
        super().__post_init__()
        check_unique(self.name, self.unique, self.vocab, LONGEST * self.trained)

    def vocabulary(self) -> list[str]:
        return [*words("t", self.vocab), "="]

    def group(self, count: int) -> str:
        lo, hi = next((lo, hi) for lo, hi in doubling(self.trained, LONGEST * self.trained) if count <= hi)
        return f"length_{lo + 1}_{hi}"

    def groups(self) -> list[str]:
        return [f"length_{lo + 1}_{hi}" for lo, hi in doubling(self.trained, LONGEST * self.trained)]

    def draw(self, rng: random.Random, split: str) -> Line:
        count = rng.randint(1, self.trained if split == "train" else LONGEST * self.trained)
        tokens = draw_tokens(rng, count, self.vocab, self.unique)
        return copy_line(rng, self.name, tokens, 0, self.group(count), count, self.vocab)
