"""How many jobs of a -m sweep run at once on this machine (hydra/launcher=cores, Hydra's joblib launcher): one per
core when jobs train on CPU, one at a time on a GPU, each with cores / (jobs at once) threads. Decided by a Hydra
callback when the sweep starts, before the launcher is made from the config."""
from __future__ import annotations

import math
import os
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write


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


def sweep_jobs(config: DictConfig) -> int:
    """The number of jobs the sweep will run."""
    params = dict(config.hydra.sweeper.get("params") or {})
    return math.prod(sweep_sizes(params, list(config.hydra.overrides.task)).values())


def running_at_once(config: DictConfig, jobs: int) -> int:
    """Jobs running side by side once the launcher is set: hydra.launcher.n_jobs (joblib's: -1 is every core),
    1 for a launcher without it (basic runs one after another; a cluster's queue decides for itself)."""
    n_jobs = config.hydra.launcher.get("n_jobs")
    if not n_jobs:
        return 1
    return max(1, min(jobs, n_jobs if n_jobs > 0 else cores() + 1 + n_jobs))


def cores() -> int:
    """The cores this process may use (its CPU affinity and container quota), as joblib counts them."""
    from joblib import cpu_count

    return cpu_count()


def on_cpu(trainer: DictConfig) -> bool:
    if trainer.accelerator == "cpu":
        return True
    import torch

    return trainer.accelerator == "auto" and not torch.cuda.is_available()


def jobs_at_once(config: DictConfig, jobs: int, available: int) -> int:
    """One job per core on CPU, never more than the sweep has jobs; one at a time on GPUs, where every job would
    otherwise land on the first one, and for jobs that start processes of their own (trainer=ddp's ddp_spawn
    cannot start them from a joblib worker): one at a time runs in this process."""
    if not on_cpu(config.trainer) or config.trainer.devices != 1:
        return 1
    return max(1, min(jobs, available))


def job_threads(at_once: int, available: int) -> int:
    """Torch threads each job gets: what joblib's workers are given (its OMP_NUM_THREADS), or this process's
    OMP_NUM_THREADS when the user set one (joblib keeps it)."""
    return int(os.environ.get("OMP_NUM_THREADS") or max(1, available // at_once))


class JobsPerCore(Callback):
    """Sets hydra.launcher.n_jobs when it is 0 (configs/hydra/launcher/cores.yaml) and says what runs at once."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launcher = config.hydra.launcher
        if "n_jobs" not in launcher:  # another launcher (basic, slurm) decides for itself
            return
        jobs, available = sweep_jobs(config), cores()
        if launcher.n_jobs == 0:
            with read_write(launcher), open_dict(launcher):
                launcher.n_jobs = jobs_at_once(config, jobs, available)
        at_once = running_at_once(config, jobs)
        print(f"sweep: {jobs} jobs, {at_once} at a time ({available} cores), "
              f"{job_threads(at_once, available)} thread(s) each", flush=True)
