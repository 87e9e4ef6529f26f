"""The calculator: arithmetic on 0..99 written in words ("two plus three equals five"), one problem per line, split
by problem so held-out problems test whether the model computes rather than recalls. The built-in corpus of
`python train.py`, a task like the attention tasks; `python -m gpt which-split` (gpt/evaluation/which_split.py) says
where a problem is."""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

from gpt.data.tasks.base import Line, Task, Turn
from gpt.validate import Fraction, check_once

UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
OPERATIONS = ("plus", "minus", "times", "divided by")
MAX_OPERAND = 99


def number_to_words(n: int) -> str:
    """0 <= n < 1,000,000 -> lowercase words with no "and" and no hyphens: 9801 -> "nine thousand eight hundred one"."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"{n} is outside 0..999999")
    if n < 20:
        return UNITS[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + UNITS[n % 10])
    if n < 1000:
        head, rest = divmod(n, 100)
        return f"{UNITS[head]} hundred" + ("" if rest == 0 else " " + number_to_words(rest))
    head, rest = divmod(n, 1000)
    return f"{number_to_words(head)} thousand" + ("" if rest == 0 else " " + number_to_words(rest))


_WORD_VALUES = {w: i for i, w in enumerate(UNITS)} | {w: 10 * i for i, w in enumerate(TENS) if w}


def words_to_number(text: str) -> int:
    """Inverse of number_to_words; ValueError for anything it would not write."""
    total, current = 0, 0
    for word in text.split():
        if word in _WORD_VALUES:
            current += _WORD_VALUES[word]
        elif word == "hundred":
            current *= 100
        elif word == "thousand":
            total, current = total + current * 1000, 0
        else:
            raise ValueError(f"{word!r} is not a number word")
    value = total + current
    if number_to_words(value) != " ".join(text.split()):
        raise ValueError(f"{text!r} is not a canonical number")
    return value


@dataclass(frozen=True)
class Problem:
    a: int
    op: str  # one of OPERATIONS
    b: int

    @property
    def answer(self) -> int:
        if self.op == "plus":
            return self.a + self.b
        if self.op == "minus":
            return self.a - self.b
        if self.op == "times":
            return self.a * self.b
        return self.a // self.b

    @property
    def prompt(self) -> str:
        return f"{number_to_words(self.a)} {self.op} {number_to_words(self.b)} equals"

    @property
    def target(self) -> str:
        """The exact completion graded (gpt.evaluation.evaluate): the answer in words."""
        return number_to_words(self.answer)

    @property
    def group(self) -> str:
        """The column accuracy is reported under."""
        return self.op

    @property
    def text(self) -> str:
        return f"{self.prompt} {self.target}"


@lru_cache(maxsize=1)
def all_problems() -> tuple[Problem, ...]:
    """Every problem with operands 0..99: minus only when the answer is not negative, division only
    when it is exact and the divisor is not zero. Cached: listing them takes 0.2 s, and a run's start listed
    them 12 times (four operations for each of three splits)."""
    operands = range(MAX_OPERAND + 1)
    problems = []
    for a in operands:
        for b in operands:
            problems.append(Problem(a, "plus", b))
            if a >= b:
                problems.append(Problem(a, "minus", b))
            problems.append(Problem(a, "times", b))
            if b and a % b == 0:
                problems.append(Problem(a, "divided by", b))
    return tuple(problems)


@lru_cache(maxsize=8)
def split_problems(seed: int, val_fraction: float, test_fraction: float) -> dict[str, tuple[Problem, ...]]:
    """Shuffle each operation's problems with `seed` and cut train / val / test, so every split has
    every operation in proportion and no problem is in two splits. Cached: a run's three splits come from one
    shuffle."""
    if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(f"val_fraction={val_fraction} and test_fraction={test_fraction} must be in (0, 1) "
                         "and sum to less than 1")
    rng = random.Random(seed)
    splits: dict[str, list[Problem]] = {"train": [], "val": [], "test": []}
    for op in OPERATIONS:
        problems = [p for p in all_problems() if p.op == op]
        rng.shuffle(problems)
        n_val, n_test = round(len(problems) * val_fraction), round(len(problems) * test_fraction)
        splits["val"] += problems[:n_val]
        splits["test"] += problems[n_val:n_val + n_test]
        splits["train"] += problems[n_val + n_test:]
    for problems in splits.values():
        rng.shuffle(problems)
    return {split: tuple(problems) for split, problems in splits.items()}


def vocabulary() -> list[str]:
    """Every word a problem can contain."""
    words = set(UNITS) | {w for w in TENS if w} | {"hundred", "thousand", "equals", "plus", "minus", "times",
                                                 "divided", "by"}
    return sorted(words)


@dataclass(frozen=True)
class Calculator(Task):
    """Every problem of `operations` (all four by default), `seven times eight equals` -> `fifty six`, split by
    problem into val_fraction, test_fraction and the rest for training. Training scores every word of a line, so
    the model also learns to write problems (its sample text shows that)."""

    name: ClassVar[str] = "calculator"
    held_out_lines: ClassVar[int | None] = None  # grade every held-out problem
    val_fraction: Fraction = 0.1
    test_fraction: Fraction = 0.1
    operations: tuple[str, ...] | None = None  # a subset such as (plus, minus); None for all four

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.operations is not None and not self.operations:  # else [] would silently train on all four
            raise ValueError("data.tasks.calculator.operations=[] names no operation: list some, such as [plus,minus], "
                             "or null for all four")
        check_once("data.tasks.calculator.operations", self.operations or (), "operation")
        unknown = sorted(set(self.operations or ()) - set(OPERATIONS))
        if unknown:
            raise ValueError(f"data.tasks.calculator.operations has unknown {unknown}; choose from {list(OPERATIONS)}")
        if self.val_fraction + self.test_fraction >= 1:
            raise ValueError(f"data.tasks.calculator.val_fraction={self.val_fraction} and test_fraction="
                             f"{self.test_fraction} leave nothing to train on: their sum must be below 1")

    def vocabulary(self) -> list[str]:
        return vocabulary()

    def groups(self) -> list[str]:
        return list(self.operations or OPERATIONS)

    def split_settings(self, seed: int) -> dict[str, Any]:
        # The seed shuffles each operation's problems before the cut, so another seed holds out other problems.
        knob = f"data.tasks.{self.name}."
        return {"data.seed": seed, f"{knob}val_fraction": self.val_fraction,
                f"{knob}test_fraction": self.test_fraction}

    def lines(self, seed: int, split: str, count: int | None) -> list[Line]:
        chosen = self.groups()
        problems = [p for p in split_problems(seed, self.val_fraction, self.test_fraction)[split] if p.op in chosen]
        # An operation's share rounds to no problem (its 229 divisions at a tiny fraction): its column would grade
        # nothing, and an empty split ended in an unpacking error.
        missing = [op for op in chosen if not any(p.op == op for p in problems)]
        if missing:
            raise ValueError(f"data.tasks.calculator: the {split} split holds no {missing[0]} problem at val_fraction="
                             f"{self.val_fraction} and test_fraction={self.test_fraction}: raise them")
        return [Line(self.name, (Turn(p.prompt, p.target, p.op),), scores_prompt=True) for p in problems][:count]
