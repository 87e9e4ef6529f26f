"""What every task shares: a line of question-and-answer turns, each answer graded under a column and a level; the
Task interface (a vocabulary, lines per split, the columns accuracy is reported under); and the sampled tasks' split
of lines into train / val / test by a hash of their text up to their first answer, so a held-out answer can never be
trained on."""
from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from gpt.validate import check_fields

HELD_OUT_FRACTION = 0.1  # of all possible lines, for val and for test each
MAX_DRAWS_PER_LINE = 1000  # a task whose lines almost never hash into a split is too small to split


@dataclass(frozen=True)
class Turn:
    """Words given and the answer to them. The answer is graded under `group` (a column of the capability matrix)
    and at `level` (what curves plot it against: tokens copied, pairs in the line, tokens back; None for no
    curve); `chance` is the share of its tokens a guess gets right (None where no guess is meaningful)."""

    given: str
    answer: str
    group: str
    level: int | None = None
    chance: float | None = None


@dataclass(frozen=True)
class Example:
    """One graded answer: `target` must follow `prompt` (the line up to it), at the end of the line when
    `last` (so a model that runs on past the last answer is wrong). Group, level and chance are its turn's."""

    task: str
    prompt: str
    target: str
    group: str
    level: int | None = None
    chance: float | None = None
    last: bool = True


@dataclass(frozen=True)
class Line:
    """One row of a task: turns of words given and words to answer (`prompt answer prompt answer ...`).
    Training scores every answer, and the words given too where `scores_prompt` (the calculator's problems); a
    random key or filler that no model can predict is not scored. Grading scores every answer (examples)."""

    task: str
    turns: tuple[Turn, ...]
    scores_prompt: bool = False

    @property
    def text(self) -> str:
        return " ".join(word for turn in self.turns for word in (turn.given, turn.answer) if word)

    @property
    def split_key(self) -> str:
        """The text that decides the line's split: up to and including its first answer. Every graded answer's prompt
        and answer hold it, so two lines sharing a graded answer (the same keys asked first, the same first question)
        share it and land in one split; the whole text would not do: lines differing only after a shared answer
        would put that answer in two splits. A one-turn line's key is its whole text."""
        first = self.turns[0]
        return " ".join(word for word in (first.given, first.answer) if word)

    @property
    def examples(self) -> tuple[Example, ...]:
        """Each answer with the line up to it as its prompt."""
        examples, before = [], ""
        for i, turn in enumerate(self.turns):
            prompt = f"{before} {turn.given}".strip()
            examples.append(Example(self.task, prompt, turn.answer, turn.group, turn.level, turn.chance,
                                    last=i == len(self.turns) - 1))
            before = f"{prompt} {turn.answer}"
        return tuple(examples)


def split_of(text: str) -> str:
    """train, val or test, fixed by the text alone (a line's split_key): the same text always lands in the same
    split."""
    bucket = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2**64
    if bucket < HELD_OUT_FRACTION:
        return "val"
    return "test" if bucket < 2 * HELD_OUT_FRACTION else "train"


def doubling(first: int, last: int) -> list[tuple[int, int]]:
    """(lo, hi] ranges that double in width from (0, first] until one ends at `last`: 8, 64 -> 1-8, 9-16, 17-32,
    33-64. Distances and lengths are reported in these, so each range is as hard to reach as all those before."""
    edges = [0, min(first, last)]
    while edges[-1] < last:
        edges.append(min(2 * edges[-1], last))
    return list(zip(edges, edges[1:]))


def words(prefix: str, count: int) -> list[str]:
    """A compact vocabulary of `count` word tokens: k0 k1 ... (one token each for the word tokenizer)."""
    return [f"{prefix}{i}" for i in range(count)]


@dataclass(frozen=True)
class Task(ABC):
    """A source of lines, one example per line. Subclasses are frozen dataclasses whose fields are the task's knobs
    (the keys of configs/data/<name>.yaml under data.tasks.<name>), typed so that __post_init__ checks them."""

    name: ClassVar[str]
    level: ClassVar[str | None] = None  # what an answer's level counts (tokens copied, ...); None: no levels
    # How many held-out lines `python -m gpt evaluate` grades per split: None for every line of a finite split.
    held_out_lines: ClassVar[int | None] = 1000
    # Refused in a mixture: another task's lines would train what this one must meet untrained (length's positions).
    runs_alone: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_fields(self, f"data.tasks.{self.name}.")

    @abstractmethod
    def vocabulary(self) -> list[str]:
        """Every word a line can contain."""

    @abstractmethod
    def lines(self, seed: int, split: str, count: int | None) -> list[Line]:
        """`count` lines of `split` (None: all of a finite split), the same for the same seed; no line is in two
        splits."""

    def groups(self) -> list[str]:
        """The columns accuracy is reported under, in order."""
        return [self.name]

    def knobs(self) -> dict[str, Any]:
        return asdict(self)

    def split_settings(self, seed: int) -> dict[str, Any]:
        """The settings, by name, that decide which split a line lands in besides its text: a run resumed with
        others would train on lines its checkpoint was graded on as held out, or grade lines it trained on."""
        return {}


@dataclass(frozen=True)
class SampledTask(Task):
    """A task whose lines are drawn at random (there are far more than any run sees) and split by the hash of their
    split_key alone, whatever the seed and knobs."""

    @abstractmethod
    def draw(self, rng: random.Random, split: str) -> Line:
        """One random line for `split` (held-out splits may differ in kind, e.g. longer lines)."""

    def lines(self, seed: int, split: str, count: int | None) -> list[Line]:
        """Each split draws from its own seeded stream and keeps only the lines whose split_key hashes into it, so
        splits share no graded answer whatever their sizes."""
        if count is None:
            raise ValueError(f"data={self.name} draws its lines at random: set data.train_lines and data.val_lines "
                             "to how many")
        if count == 0:
            return []
        rng = random.Random(f"{self.name}/{seed}/{split}")
        kept: list[Line] = []
        for _ in range(count * MAX_DRAWS_PER_LINE):
            line = self.draw(rng, split)
            if split_of(line.split_key) == split:
                kept.append(line)
                if len(kept) == count:
                    return kept
        raise ValueError(f"data={self.name}: too few distinct lines to fill the {split} split; "
                         "make the task larger (more tokens or a longer sequence)")
