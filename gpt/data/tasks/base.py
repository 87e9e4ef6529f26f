"""What every attention task shares: a line of question-and-answer turns, the example graded from it, and the
split of lines into train / val / test by a hash of their text, so a held-out line can never be trained on."""
from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

SPLITS = ("train", "val", "test")
HELD_OUT_FRACTION = 0.1  # of all possible lines, for val and for test each
MAX_DRAWS_PER_LINE = 1000  # a task whose lines almost never hash into a split is too small to split


@dataclass(frozen=True)
class Example:
    """What gpt.evaluation.evaluate grades: greedy completion of `prompt` must equal `target`; reported under `group`."""

    prompt: str
    target: str
    group: str


@dataclass(frozen=True)
class Line:
    """One row of a task: words given and words to answer, in turns (`prompt answer prompt answer ...`).
    Training scores every answer; grading asks the last one, whose answer ends the line."""

    turns: tuple[tuple[str, str], ...]
    group: str

    @property
    def text(self) -> str:
        return " ".join(word for turn in self.turns for word in turn if word)

    @property
    def example(self) -> Example:
        *earlier, (prompt, target) = self.turns
        given = " ".join(word for turn in earlier for word in turn if word)
        return Example(f"{given} {prompt}".strip(), target, self.group)


def split_of(text: str) -> str:
    """train, val or test, fixed by the line's text alone: the same line always lands in the same split."""
    bucket = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2**64
    if bucket < HELD_OUT_FRACTION:
        return "val"
    return "test" if bucket < 2 * HELD_OUT_FRACTION else "train"


def words(prefix: str, count: int) -> list[str]:
    """A compact vocabulary of `count` word tokens: k0 k1 ... (one token each for the word tokenizer)."""
    return [f"{prefix}{i}" for i in range(count)]


def positive(**knobs: int) -> None:
    for name, value in knobs.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"data.tasks.*.{name}={value!r} must be a positive integer")


@dataclass(frozen=True)
class Task(ABC):
    """A generator of lines. Subclasses are frozen dataclasses whose fields are the task's difficulty knobs
    (the keys of configs/data/<name>.yaml) and validate them in __post_init__."""

    name: ClassVar[str]

    @abstractmethod
    def vocabulary(self) -> list[str]:
        """Every word a line can contain."""

    @abstractmethod
    def draw(self, rng: random.Random, split: str) -> Line:
        """One random line for `split` (held-out splits may differ in kind, e.g. longer lines)."""

    def groups(self) -> list[str]:
        """The columns accuracy is reported under, in order."""
        return [self.name]

    def knobs(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self, seed: int, split: str, count: int) -> list[Line]:
        """`count` lines of `split`, the same for the same seed. Each split draws from its own seeded stream and
        keeps only the lines that hash into it, so splits are disjoint whatever their sizes."""
        if count == 0:
            return []
        rng = random.Random(f"{self.name}/{seed}/{split}")
        kept: list[Line] = []
        for _ in range(count * MAX_DRAWS_PER_LINE):
            line = self.draw(rng, split)
            if split_of(line.text) == split:
                kept.append(line)
                if len(kept) == count:
                    return kept
        raise ValueError(f"data={self.name}: too few distinct lines to fill the {split} split; "
                         "make the task larger (more tokens or a longer sequence)")
