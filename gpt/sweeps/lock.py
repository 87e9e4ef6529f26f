"""One sweep at a time in a sweep folder. Two sweeps given one hydra.sweep.dir (in two terminals, both with
resume=true) trained the same jobs into the same job folders; a job's own folder lock only turned the second away
from a job while the first ran it. The sweep's process holds a lock in the folder from before Hydra writes its
multirun.yaml until it exits; its workers never take it."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, TextIO

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gpt.training.run_folder_lock import locked

SWEEP_LOCK = ".sweep.lock"  # not run_folder_lock.LOCK: a stopping sweep waits for every job's .lock under its folder
_held: list[TextIO] = []  # this process's sweep lock, open until it exits


def claim_sweep(sweep_dir: Path) -> None:
    """Hold `sweep_dir`'s sweep lock for as long as this process lives, its pid written in it; or refuse in one line,
    naming the process that holds it. A killed sweep leaves the file with its pid, not the lock: resume=true goes on."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / SWEEP_LOCK
    lock = locked(path)
    if lock is None:
        holder = path.read_text().strip()  # empty for the moment between its lock and its pid
        raise ValueError(f"{sweep_dir} is in use by another sweep{f' (process {holder})' if holder else ''}: wait for "
                         "it to end, or pass another hydra.sweep.dir=")
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    _held.append(lock)


def sweep_started(sweep_dir: Path) -> float | None:
    """When the sweep in `sweep_dir` started (this invocation, resumed or not): claim_sweep writes its pid into the
    lock then, and nothing writes it again until the next sweep there starts. None for a folder no sweep claimed."""
    try:
        return (sweep_dir / SWEEP_LOCK).stat().st_mtime
    except FileNotFoundError:
        return None


class OneSweepPerFolder(Callback):
    """Takes the sweep folder's lock when the sweep starts (configs/train.yaml), or ends the command with exit status
    2 and one line: Hydra turns a callback's exception into a warning and goes on."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            claim_sweep(Path(config.hydra.sweep.dir))
        except (ValueError, OSError) as err:
            message = err if isinstance(err, ValueError) else \
                f"cannot make the sweep folder {config.hydra.sweep.dir}: {err.strerror}; pass another hydra.sweep.dir="
            print(f"error: {message}", file=sys.stderr)
            sys.exit(2)
