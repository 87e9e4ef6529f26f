"""A Hydra callback that prints a multirun's expected wall time before its first job starts: the jobs the
sweep will run (its parameters and any comma lists on the command line) times the seconds per job measured
for the preset."""
from __future__ import annotations

import math
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


def sweep_sizes(params: dict[str, str], overrides: list[str]) -> dict[str, int]:
    """How many values each swept key takes: the preset's sweeper params, replaced by the command line's."""
    sizes = {key: len(str(value).split(",")) for key, value in params.items()}
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key.startswith("hydra.") or not value:
            continue
        plain = not any(c in value for c in "[]{}()")  # a list or dict value is one value, not a sweep
        sizes[key] = len(value.split(",")) if plain else 1
    return sizes


class ExpectedTime(Callback):
    def __init__(self, seconds_per_job: float, measured: str) -> None:
        self.seconds_per_job, self.measured = seconds_per_job, measured

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        params = dict(config.hydra.sweeper.get("params") or {})
        jobs = math.prod(sweep_sizes(params, list(config.hydra.overrides.task)).values())
        minutes = jobs * self.seconds_per_job / 60
        print(f"expected wall time: {jobs} jobs x ~{self.seconds_per_job:.0f} s = ~{minutes:.0f} min "
              f"({self.measured})", flush=True)
