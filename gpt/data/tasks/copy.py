"""Copying (the induction-head task; Olsson et al. 2022): a random sequence, `=`, the same sequence again.
With blanks it is selective copying (MAD; Poli et al. 2024): the tokens lie scattered among blanks `_` and
only they are copied, so the model must also skip what is not to be copied. With unique tokens (drawn without
replacement) each token says where the copy goes next at any length, so copying is one algorithm at every length."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from gpt.data.tasks.base import Line, SampledTask, Turn, words
from gpt.validate import NonNegativeInt, PositiveInt

BLANK = "_"


def draw_tokens(rng: random.Random, count: int, vocab: int, unique: bool) -> list[str]:
    """`count` tokens of t0..t<vocab - 1>, all different when `unique`."""
    ids = rng.sample(range(vocab), count) if unique else [rng.randrange(vocab) for _ in range(count)]
    return [f"t{i}" for i in ids]


def copy_line(rng: random.Random, task: str, tokens: list[str], blanks: int, group: str, level: int | None,
              vocab: int) -> Line:
    """`<tokens with `blanks` blanks scattered among them> = <tokens>` as one question and its answer."""
    context = list(tokens)
    for _ in range(blanks):
        context.insert(rng.randrange(len(context) + 1), BLANK)
    return Line(task, (Turn(" ".join(context) + " =", " ".join(tokens), group, level, 1 / vocab),))


def check_unique(task: str, unique: bool, vocab: int, longest: int) -> None:
    if unique and vocab < longest:
        raise ValueError(f"data.tasks.{task}.unique=true draws {longest} different tokens from vocab={vocab}: "
                         f"raise data.tasks.{task}.vocab to at least {longest}")


@dataclass(frozen=True)
class Copy(SampledTask):
    """`t3 t9 t1 = t3 t9 t1`: `length` tokens drawn from `vocab` (all different if `unique`), with `blanks` blanks
    among them (0: plain copy)."""

    name: ClassVar[str] = "copy"
    length: PositiveInt = 16
    vocab: PositiveInt = 16
    blanks: NonNegativeInt = 0  # 0: plain copy
    unique: bool = False  # tokens drawn without replacement

    def __post_init__(self) -> None:
        super().__post_init__()
        check_unique(self.name, self.unique, self.vocab, self.length)

    def vocabulary(self) -> list[str]:
        return [*words("t", self.vocab), "=", *([BLANK] if self.blanks else [])]

    def draw(self, rng: random.Random, split: str) -> Line:
        tokens = draw_tokens(rng, self.length, self.vocab, self.unique)
        return copy_line(rng, self.name, tokens, self.blanks, self.name, None, self.vocab)
