"""A `data.tasks` mapping (configs/data/<name>.yaml's `tasks`: each task's name and knobs) read into tasks, one clear
error per mistake. Apart from the data module, which needs Lightning, so that train.py's checks and which-split read
it without importing Lightning."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from gpt.data.tasks import TASKS, Task
from gpt.overrides import quoted
from gpt.validate import did_you_mean


def plain(value: Any) -> Any:
    """A knob's value as a task keeps it: a YAML list as a tuple (tasks are frozen, hashable dataclasses)."""
    return tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else value


def build_tasks(spec: Mapping[str, Mapping[str, Any] | None]) -> tuple[Task, ...]:
    """Tasks from `{name: {knob: value}}` (configs/data/<name>.yaml's `tasks`), one clear error per mistake."""
    if not spec:
        raise ValueError(f"data.tasks is empty: name at least one of {', '.join(TASKS)}")
    tasks = []
    for name, knobs in spec.items():
        if name not in TASKS:
            raise ValueError(f"data.tasks.{name} is not a task; choose from {', '.join(TASKS)}"
                             f"{did_you_mean(str(name), TASKS, 'data.tasks.')}")
        known = {f.name for f in fields(TASKS[name])}  # the knobs, not the ClassVars
        if not isinstance(knobs, Mapping | None):
            raise ValueError(f"data.tasks.{name}={quoted(knobs)} must be a mapping of its knobs: "
                             f"{', '.join(sorted(known))}")
        unknown = sorted(str(knob) for knob in set(knobs or {}) - known)
        if unknown:
            raise ValueError(f"data.tasks.{name}.{unknown[0]} is not a knob of {name}; its knobs: "
                             f"{', '.join(sorted(known))}"
                             f"{did_you_mean(unknown[0], sorted(known), f'data.tasks.{name}.')}")
        tasks.append(TASKS[name](**{knob: plain(value) for knob, value in (knobs or {}).items()}))
    alone = next((task.name for task in tasks if task.runs_alone), None)
    if alone and len(tasks) > 1:
        others = ", ".join(task.name for task in tasks if task.name != alone)
        raise ValueError(f"data.tasks.{alone} runs alone (data={alone}): lines of {others} can train the positions "
                         f"it must meet untrained; run {alone} in a run of its own")
    return tuple(tasks)
