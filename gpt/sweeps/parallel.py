"""How many jobs of a -m sweep run at once on this machine (hydra/launcher=cores, Hydra's joblib launcher): one per
core when jobs train on CPU, one at a time on a GPU, each with cores / (jobs at once) threads. Decided by a Hydra
callback when the sweep starts, before the launcher is made from the config. And a worker's job stops when the
sweep's process dies or is stopped with Ctrl-C, saving its checkpoint first."""
from __future__ import annotations

import atexit
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write

from gpt.training.composition import sweep_overrides
from gpt.training.recorded import as_typed
from gpt.training.run_folder_lock import LOCK, claim, discard_if_never_started, in_use, release

# Set by the process that launches a sweep, inherited by its joblib workers: how a job knows it runs in a worker
# whose sweep can die without it (SIGKILL or SIGTERM to that process alone leaves loky's workers running its queue).
SWEEP_PID = "TINYGPT_SWEEP_PID"
GRACE_S = 120  # for the stopped job to finish its step and write last.ckpt before its worker is ended anyway


def command_line_values(overrides: list[str]) -> dict[str, list[str]]:
    """Each key the command line sets (without its + or ~, Hydra's own keys left out) and the values it takes, read
    as Hydra's sweeper reads them: a comma list, range(), choice() or glob() sweeps them; a list or dict value (one
    of the lists of `key=[a,b],[c]`) or a quoted one is one value."""
    hydra = GlobalHydra.instance()  # a glob() over a group's options needs the options: set while Hydra runs
    parser = OverridesParser.create(config_loader=hydra.config_loader() if hydra.is_initialized() else None)
    values = {}
    for override in parser.parse_overrides(overrides):
        key = override.key_or_group
        if key.startswith("hydra.") or override.value() in (None, ""):
            continue
        values[key] = list(override.sweep_string_iterator()) if override.is_sweep_override() else \
            [override.get_value_element_as_str()]
    return values


def sweep_sizes(params: dict[str, str], overrides: list[str]) -> dict[str, int]:
    """How many values each swept key takes: the preset's sweeper params, replaced by the command line's."""
    return {key: len(values) for key, values in command_line_values(sweep_overrides(params, overrides)).items()}


def job_count(config: DictConfig) -> int:
    """The number of jobs the sweep will run."""
    params = dict(config.hydra.sweeper.get("params") or {})
    return math.prod(sweep_sizes(params, as_typed(config.hydra.overrides.task)).values())


def decided_at_once(config: DictConfig, jobs: int) -> int:
    """Jobs running side by side, n_jobs: 0 decided as JobsPerCore decides it: a job's config, composed again from the
    command line, still holds the 0."""
    if config.hydra.launcher.get("n_jobs") == 0:
        return jobs_at_once(config, jobs, cores())
    return running_at_once(config, jobs)


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


_worker_of: list[str] = []  # the sweep process this process is a worker of, once watch_the_sweep has seen it


def stop_file(sweep_pid: str) -> Path:
    """Made by a sweep's process at its first Ctrl-C: its workers stop their jobs and end."""
    return Path(tempfile.gettempdir()) / f"tinygpt-sweep-{sweep_pid}.stop"


def orphaned() -> bool:
    """Whether this process is a worker of a sweep whose launching process has died (it was reparented)."""
    return bool(_worker_of) and str(os.getppid()) != _worker_of[0]


def stopping() -> bool:
    """Whether this process is a worker of a sweep that has died or was stopped with Ctrl-C: it takes no more jobs."""
    return orphaned() or bool(_worker_of) and stop_file(_worker_of[0]).exists()


_in_job = threading.Event()  # set while this worker runs a job


@contextmanager
def worker_job(run_dir: Path) -> Iterator[bool]:
    """One job of a sweep, in the process that runs it; yields whether to run it. In a worker of a sweep that has
    stopped or died it does not run (its folder removed again, unless it holds an earlier attempt's work, so
    `resume=true` starts or continues it). The run folder is locked while the job runs: a stopping sweep waits for
    the locks, and a resumed sweep's job cannot write a folder the old one still writes. After the job, the worker of
    a sweep that has died ends instead of taking the next job from its queue."""
    watch_the_sweep()
    if stopping():
        discard_if_never_started(run_dir)
        yield False
        return
    try:
        claim(run_dir)
    except ValueError as err:  # another run writes this folder: its record stays its own
        print(f"error: {err}", file=sys.stderr)
        yield False
        return
    _in_job.set()
    try:
        yield True
    finally:
        release(run_dir)
        _in_job.clear()
        if orphaned():
            os._exit(130)


def watch_the_sweep() -> None:
    """In a sweep's worker, once per process: when the sweep's process dies or is stopped, the running job stops as
    Ctrl-C stops it (StopOnInterrupt asks `stopping` at each step: its step finished, last.ckpt written, so
    `resume=true` continues it). A worker ends once its sweep's process has gone and it runs no job: not while that
    process lives, whose joblib would answer a worker's exit by killing the others mid-save. One whose job does not
    stop within GRACE_S ends anyway."""
    sweep = os.environ.get(SWEEP_PID)
    if _worker_of or sweep != str(os.getppid()):
        return  # watched already, or not a worker (a one-at-a-time sweep runs in the sweep's own process)
    _worker_of.append(sweep)

    def watch() -> None:
        while not stopping():
            time.sleep(1)
        if _in_job.is_set():
            why = "has gone" if orphaned() else "was stopped"
            print(f"the sweep's process {_worker_of[0]} {why}: stopping this job as Ctrl-C would", file=sys.stderr,
                  flush=True)
        deadline = time.monotonic() + GRACE_S
        while (_in_job.is_set() or not orphaned()) and time.monotonic() < deadline:
            time.sleep(0.2)
        os._exit(130)

    threading.Thread(target=watch, name="sweep-watch", daemon=True).start()


def stop_workers_on_ctrl_c(sweep_dir: Path) -> None:
    """In a sweep's process whose jobs run in workers: joblib answers Ctrl-C by killing the workers at once, losing
    every running job's steps since its last checkpoint (all of them when it was validating). Instead the first Ctrl-C
    has each running job finish its step and save, and waits for them (their run folders' locks free) before joblib
    ends the workers; queued jobs do not start. A second Ctrl-C ends the sweep at once, as joblib does."""
    stop = stop_file(str(os.getpid()))
    stop.unlink(missing_ok=True)  # one left by an earlier process with this pid

    def at_once(signum: int, frame: Any) -> None:
        # SystemExit, not KeyboardInterrupt: joblib ends its workers on either, and the interrupt ended in a traceback
        print("Ctrl-C again: the sweep stops now, its running jobs without saving; the same command plus resume=true "
              "continues each from its last checkpoint", file=sys.stderr, flush=True)
        raise SystemExit(130)

    def on_ctrl_c(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, at_once)
        print("Ctrl-C: each running job finishes its step and saves its checkpoint, queued jobs do not start; the "
              "same command plus resume=true continues the sweep (Ctrl-C again stops at once)", file=sys.stderr,
              flush=True)
        stop.touch()
        atexit.register(stop.unlink, missing_ok=True)  # at exit: until joblib has ended the workers, none starts a job
        deadline = time.monotonic() + GRACE_S + 10
        while any(in_use(lock.parent) for lock in sweep_dir.rglob(LOCK)) and time.monotonic() < deadline:
            time.sleep(0.2)
        raise SystemExit(130)

    signal.signal(signal.SIGINT, on_ctrl_c)


class JobsPerCore(Callback):
    """Sets hydra.launcher.n_jobs when it is 0 (configs/hydra/launcher/cores.yaml) and says what runs at once."""

    def __init__(self) -> None:
        self.handling_ctrl_c = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ[SWEEP_PID] = str(os.getpid())  # before the launcher starts the workers that inherit it
        launcher = config.hydra.launcher
        if "n_jobs" not in launcher:  # another launcher (basic, slurm) decides for itself
            return
        jobs, available = job_count(config), cores()
        if launcher.n_jobs == 0:
            with read_write(launcher), open_dict(launcher):
                launcher.n_jobs = jobs_at_once(config, jobs, available)
        at_once = running_at_once(config, jobs)
        print(f"sweep: {jobs} jobs, {at_once} at a time ({available} cores), "
              f"{job_threads(at_once, available)} thread(s) each", flush=True)
        if at_once > 1:  # jobs in joblib's workers; one at a time runs in this process, where Ctrl-C stops it cleanly
            stop_workers_on_ctrl_c(Path(config.hydra.sweep.dir))
            self.handling_ctrl_c = True

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        # Every job has returned. What is left is the report (configs/train.yaml ends it after this) and joblib
        # ending its workers at exit, seconds in which stop_workers_on_ctrl_c's handler would announce running jobs
        # there are none of and raise inside the interpreter's shutdown: a traceback and exit status 0.
        if self.handling_ctrl_c:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
