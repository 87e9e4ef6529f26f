"""A Hydra callback that prints a multirun's expected wall time before its first job starts: the jobs the
sweep will run (its parameters and any comma lists on the command line) times the seconds per job measured
for the preset, divided among the jobs that run at once (gpt/sweeps/parallel.py)."""
from __future__ import annotations

import math
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gpt.sweeps.parallel import running_at_once, sweep_jobs


class ExpectedTime(Callback):
    def __init__(self, seconds_per_job: float, measured: str) -> None:
        self.seconds_per_job, self.measured = seconds_per_job, measured

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        jobs = sweep_jobs(config)
        at_once = running_at_once(config, jobs)
        minutes = math.ceil(jobs / at_once) * self.seconds_per_job / 60
        print(f"expected wall time: {jobs} jobs x ~{self.seconds_per_job:.0f} s, {at_once} at a time = "
              f"~{minutes:.0f} min ({self.measured})", flush=True)
