"""TaskData: one task (the calculator, an attention task), or several mixed (`data=tasks`), as a DataModule of one
line per row, with the held-out lines graded at each validation and everything model.pt needs to regenerate
the test split."""
from __future__ import annotations

import random
from collections.abc import Sequence
from functools import cached_property, lru_cache
from typing import Any

import torch

from gpt.data.batches import BatchedData, RowBatches, line_tensors
from gpt.data.tasks import Line, Task
from gpt.data.tasks.spec import build_tasks
from gpt.data.tokenizers.vocab import WordTokenizer
from gpt.validate import PositiveInt


@lru_cache(maxsize=8)
def task_lines(tasks: tuple[Task, ...], seed: int, split: str, count: int | None) -> tuple[Line, ...]:
    """`count` lines of each task for `split` (None: all of a finite split), a mixture's tasks interleaved by a
    seeded shuffle. Cached, with the rows below: a sweep's jobs run in one process and share data.seed, so they
    draw and encode each split once."""
    lines: list[Line] = []
    for task in tasks:
        drawn = task.lines(seed, split, count)
        if count is not None and len(drawn) < count:  # a finite split (the calculator's) has no more to give
            raise ValueError(f"data.{split}_lines={count} asks for more than the {len(drawn)} lines of {task.name}'s "
                             f"{split} split: lower it, or set null for every one")
        lines += drawn
    if len(tasks) > 1:
        random.Random(f"{seed}/{split}").shuffle(lines)
    return tuple(lines)


@lru_cache(maxsize=4)
def task_tokenizer(tasks: tuple[Task, ...]) -> WordTokenizer:
    return WordTokenizer(["\n", *sorted({w for task in tasks for w in task.vocabulary()})])


def encode_line(tokenizer: WordTokenizer, line: Line) -> tuple[list[int], list[bool], list[tuple[int, int]]]:
    """The line's token ids between newlines; which of them the loss scores (answers, the end; the words given
    too where the line says so); and where each turn's answer lies in the ids (start, end)."""
    newline = tokenizer.encode("\n")[0]
    ids, scored, spans = [newline], [False], []
    for turn in line.turns:
        given_ids, answer_ids = tokenizer.encode(turn.given), tokenizer.encode(turn.answer)
        ids += given_ids
        spans.append((len(ids), len(ids) + len(answer_ids)))
        ids += answer_ids
        scored += [line.scores_prompt] * len(given_ids) + [True] * len(answer_ids)
    return ids + [newline], scored + [True], spans


@lru_cache(maxsize=8)
def task_rows(tasks: tuple[Task, ...], seed: int, split: str,
              count: int | None) -> tuple[tuple[list[int], ...], tuple[list[bool], ...]]:
    tokenizer = task_tokenizer(tasks)
    return tuple(zip(*(encode_line(tokenizer, line)[:2] for line in task_lines(tasks, seed, split, count))))


class TaskData(BatchedData):
    """Rows `\\n <line> \\n` of the tasks in `tasks` ({name: knobs}). The loss scores the answers and the newline that
    ends the line (and a line's question where the task says so: gpt/data/tasks/base.py, Line). `train_lines` and
    `val_lines` are per task (None: every line of a finite split, the calculator's); `eval_lines` of the validation
    lines, a seeded sample, have every answer graded at each validation (None: all of them).

    The tasks are built on first use, not in __init__: a mistake in their knobs (an unknown knob) is a one-line
    ValueError from the first use, which train.py's checks make before any work."""

    def __init__(self, tasks: dict[str, dict[str, Any]], seed: int = 0, batch_size: PositiveInt = 64,
                 train_lines: PositiveInt | None = 20000, val_lines: PositiveInt | None = 256,
                 eval_lines: PositiveInt | None = None) -> None:
        super().__init__()
        self.spec = {name: dict(knobs or {}) for name, knobs in tasks.items()}
        self.seed, self.batch_size, self.train_lines, self.val_lines = seed, batch_size, train_lines, val_lines
        self.eval_lines = eval_lines

    @cached_property
    def tasks(self) -> tuple[Task, ...]:
        return build_tasks(self.spec)

    @property
    def tokenizer(self) -> WordTokenizer:
        return task_tokenizer(self.tasks)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def counts(self) -> dict[str, int | None]:
        return {"train": self.train_lines, "val": self.val_lines}

    @property
    def splits(self) -> dict[str, tuple[Line, ...]]:
        return {split: task_lines(self.tasks, self.seed, split, count) for split, count in self.counts.items()}

    @property
    def rows(self) -> dict[str, tuple[tuple[list[int], ...], tuple[list[bool], ...]]]:
        return {split: task_rows(self.tasks, self.seed, split, count) for split, count in self.counts.items()}

    @property
    def max_tokens(self) -> int:
        """The longest row's inputs (every token of it but the last) among the lines trained and validated on and
        the test lines `python -m gpt evaluate` grades: held-out lines may be longer (the length task's, 4x), and a
        model whose block cannot hold them trains but is refused when graded."""
        longest = max(len(ids) for ids_of_split, _ in self.rows.values() for ids in ids_of_split)
        return max(longest, longest_test_row(self.tasks, self.seed)) - 1

    @property
    def groups(self) -> list[str]:
        return [group for task in self.tasks for group in task.groups()]

    @property
    def level_names(self) -> dict[str, str]:
        """What each task's levels count, for the axes of levels.png."""
        return {task.name: task.level for task in self.tasks if task.level}

    @property
    def graded_lines(self) -> list[Line]:
        """The validation lines graded at each validation (every answer of each): all, or a fixed seeded sample."""
        lines = list(self.splits["val"])
        if self.eval_lines is None or self.eval_lines >= len(lines):
            return lines
        return random.Random(self.seed).sample(lines, self.eval_lines)

    @property
    def notes(self) -> list[str]:
        return [note] if (note := repeats_note(self.graded_lines, "val", "data.val_lines")) else []

    @property
    def example_prompt(self) -> str:
        """A held-out question, for train.py to suggest trying with generate.py."""
        return self.splits["val"][0].examples[-1].prompt

    @property
    def meta(self) -> dict[str, Any]:
        name = self.tasks[0].name if len(self.tasks) == 1 else "tasks"
        return {"corpus": name, "one_example_per_line": True, "seed": self.seed, "train_lines": self.train_lines,
                "tasks": {task.name: task.knobs() for task in self.tasks}, "split_settings": self.split_settings}

    @property
    def split_settings(self) -> dict[str, dict[str, Any]]:
        """Per task, the settings that decide which split a line lands in (Task.split_settings)."""
        return {task.name: task.split_settings(self.seed) for task in self.tasks}

    def check_split_as(self, saved: dict[str, dict[str, Any]], who: str, fix: str) -> None:
        """Refuse to train on from `who` (a checkpoint, init_from's model) if this run's settings split a task's
        lines otherwise than `saved` (its split_settings) did: the calculator's data.seed shuffles its problems
        before the cut, so the new held-out problems were trained on and would be reported as held out."""
        for task, now in self.split_settings.items():
            was = saved.get(task) or {}
            changed = [name for name in now if name in was and was[name] != now[name]]
            if changed:
                raise ValueError(f"{who} trained on {task}'s lines split otherwise: "
                                 f"{', '.join(f'{name}={now[name]} where it had {was[name]}' for name in changed)} "
                                 "(its held-out lines would hold lines it trained on); use "
                                 f"{' '.join(f'{name}={was[name]}' for name in changed)}, or {fix}")

    def state_dict(self) -> dict[str, Any]:
        """Saved in each training checkpoint, so that a run resumed from it checks its held-out lines are still
        held out."""
        return {"split_settings": self.split_settings}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A checkpoint from before this record, which Lightning never passes here, resumes unchecked."""
        self.check_split_as(state_dict.get("split_settings", {}), str(self.trainer.ckpt_path),
                            "start afresh without ckpt_path and resume=true")

    def tensors(self, split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids, scored = self.rows[split]
        # Padded to this split's longest row, not max_tokens: the length task's 4x test lines would pad every
        # validation batch to their width.
        return line_tensors(list(ids), list(scored), max(map(len, ids)) - 1, self.tokenizer.encode("\n")[0])

    def setup(self, stage: str | None = None) -> None:
        self.train_set = RowBatches(*self.tensors("train"), self.batch_size, self.seed)
        self.val_set = self.tensors("val")[:2]


def repeats_note(lines: Sequence[Line], split: str, setting: str | None = None) -> str | None:
    """A note for a task whose held-out `lines` are mostly repeats (a small task drawn many times: 600 val lines of a
    3-token copy over 3 words are 3 lines): its accuracy rests on far fewer answers than its line count says. Each
    task of a mixture is counted apart; `setting`, where one draws fewer lines."""
    for task in dict.fromkeys(line.task for line in lines):
        drawn = [line.text for line in lines if line.task == task]
        distinct = len(set(drawn))
        if distinct < len(drawn) / 2:
            return (f"{task}'s {len(drawn)} {split} lines are {distinct} distinct line{'s' * (distinct > 1)} "
                    f"drawn again and again: its accuracy rests on {distinct}, not {len(drawn)}; make the task "
                    f"larger" + (f", or lower {setting}" if setting else ""))
    return None


def held_out(meta: dict[str, Any], split: str) -> list[Line]:
    """The lines `python -m gpt evaluate` grades, regenerated from model.pt's meta."""
    return graded(build_tasks(meta["tasks"]), meta["seed"], split)


def graded(tasks: tuple[Task, ...], seed: int, split: str) -> list[Line]:
    """Each task's held_out_lines lines of `split` (every held-out problem of the calculator)."""
    return [line for task in tasks for line in task.lines(seed, split, task.held_out_lines)]


@lru_cache(maxsize=8)
def longest_test_row(tasks: tuple[Task, ...], seed: int) -> int:
    """Tokens in the longest test line evaluate grades; cached like task_rows, as a sweep's jobs share it (drawing
    the attention tasks' 3,000 took 0.6 s a job)."""
    return max((len(encode_line(task_tokenizer(tasks), line)[0]) for line in graded(tasks, seed, "test")), default=0)
