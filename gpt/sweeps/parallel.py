"""How many jobs of a -m sweep run at once on this machine (hydra/launcher=cores, Hydra's joblib launcher): one per
core when jobs train on CPU, one at a time on a GPU, each with cores / (jobs at once) threads. Decided by a Hydra
callback when the sweep starts, before the launcher is made from the config. And a worker's job stops when the
sweep's process dies."""
from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write

# Set by the process that launches a sweep, inherited by its joblib workers: how a job knows it runs in a worker
# whose sweep can die without it (SIGKILL or SIGTERM to that process alone leaves loky's workers running its queue).
SWEEP_PID = "TINYGPT_SWEEP_PID"
GRACE_S = 120  # for the stopped job to finish its step and write last.ckpt before its worker is ended anyway


def command_line_values(overrides: list[str]) -> dict[str, list[str]]:
    """Each key the command line sets (without its + or ~, Hydra's own keys left out) and the values it takes: a
    comma list sweeps them, a list or dict value is one value."""
    values = {}
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key.startswith("hydra.") or not value:
            continue
        plain = not any(c in value for c in "[]{}()")
        values[key] = value.split(",") if plain else [value]
    return values


def sweep_sizes(params: dict[str, str], overrides: list[str]) -> dict[str, int]:
    """How many values each swept key takes: the preset's sweeper params, replaced by the command line's (a key
    the same with or without its +, as the preset's `+experiment/state` and a command line's)."""
    sizes = {key.lstrip("+~"): len(str(value).split(",")) for key, value in params.items()}
    return sizes | {key: len(values) for key, values in command_line_values(overrides).items()}


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


_worker_of: list[str] = []  # the sweep process this process is a worker of, once stop_with_the_sweep has seen it


def orphaned() -> bool:
    """Whether this process is a worker of a sweep whose launching process has died (it was reparented)."""
    return bool(_worker_of) and str(os.getppid()) != _worker_of[0]


def stop_with_the_sweep() -> None:
    """In a sweep's worker, once per process: when the sweep's process dies, stop the running job as Ctrl-C does
    (its step finished, last.ckpt written, so `resume=true` continues it), then the worker, which would otherwise
    train the jobs still queued for it with nobody left to report them. The job's caller exits once it returns."""
    sweep = os.environ.get(SWEEP_PID)
    if _worker_of or sweep != str(os.getppid()):
        return  # watched already, or not a worker (a one-at-a-time sweep runs in the sweep's own process)
    _worker_of.append(sweep)

    def watch() -> None:
        while not orphaned():
            time.sleep(1)
        print(f"the sweep's process {_worker_of[0]} has gone: stopping this job as Ctrl-C would", file=sys.stderr,
              flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(GRACE_S)
        os._exit(130)

    threading.Thread(target=watch, name="sweep-watch", daemon=True).start()


class JobsPerCore(Callback):
    """Sets hydra.launcher.n_jobs when it is 0 (configs/hydra/launcher/cores.yaml) and says what runs at once."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ[SWEEP_PID] = str(os.getpid())  # before the launcher starts the workers that inherit it
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
