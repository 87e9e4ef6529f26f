"""Copying (the induction-head task; Olsson et al. 2022): a random sequence, `=`, the same sequence again.
With blanks it is selective copying (MAD; Poli et al. 2024): the tokens lie scattered among blanks `_` and
only they are copied, so the model must also skip what is not to be copied."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, words
from gpt.validate import NonNegativeInt, PositiveInt

BLANK = "_"


def copy_line(rng: random.Random, tokens: list[str], blanks: int, group: str) -> Line:
    """`<tokens with `blanks` blanks scattered among them> = <tokens>` as one question and its answer."""
    context = list(tokens)
    for _ in range(blanks):
        context.insert(rng.randrange(len(context) + 1), BLANK)
    return Line(((" ".join(context) + " =", " ".join(tokens)),), group)


@dataclass(frozen=True)
class Copy(SampledTask):
    """`t3 t9 t1 = t3 t9 t1`: `length` tokens drawn from `vocab`, with `blanks` blanks among them (0: plain copy)."""

    name: ClassVar[str] = "copy"
    length: PositiveInt = 16
    vocab: PositiveInt = 16
    blanks: NonNegativeInt = 0  # 0: plain copy

    def vocabulary(self) -> list[str]:
        return [*words("t", self.vocab), "=", *([BLANK] if self.blanks else [])]

    def draw(self, rng: random.Random, split: str) -> Line:
        tokens = [f"t{rng.randrange(self.vocab)}" for _ in range(self.length)]
        return copy_line(rng, tokens, self.blanks, self.name)
