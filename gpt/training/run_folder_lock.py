"""Which training run holds a run folder: the folder made and locked by the run that writes into it (claim), let go
by a sweep's worker that goes on to other jobs (release), asked after (in_use), and removed again when its run failed
before writing anything of its own (discard_if_never_started, discard_claimed_if_never_started)."""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import TextIO

LOCK = ".lock"  # held by the training run writing into the folder (flock: the kernel drops it if the run dies)
HYDRA_RECORD = {".hydra", "train.log", LOCK}  # what is in a run folder before the job writes anything of its own
_held: list[TextIO] = []  # this process's run-folder locks, open until it exits


def claim(run_dir: Path) -> bool:
    """Make `run_dir` and hold its lock for as long as this process lives (or until `release`: a sweep's worker
    runs job after job), or refuse in one line when another training run holds it: two runs writing one folder
    would mix their checkpoints, metrics and model.pt. The processes of one run that a launcher started (torchrun,
    SLURM, Lightning's DDP) share the folder: only the first claims it. Whether this process did."""
    if any(int(os.environ.get(rank, 0)) for rank in ("RANK", "LOCAL_RANK", "SLURM_PROCID")):
        return False
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = locked(run_dir / LOCK)
    except OSError as err:
        raise ValueError(f"cannot make the run folder {run_dir}: {err.strerror}; pass another hydra.run.dir=") from None
    if lock is None:
        raise ValueError(f"{run_dir} is in use by another training run: wait for it to end, or pass another "
                         "hydra.run.dir=")
    _held.append(lock)
    return True


def locked(path: Path) -> TextIO | None:
    """`path` opened (made if need be) with its lock taken without waiting, held while it stays open; None when another
    process holds it. flock: the kernel lets go when the holder dies, even by SIGKILL, so a lock is never stale."""
    lock = open(path, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def release(run_dir: Path) -> None:
    """Let go of this process's lock on `run_dir` (a sweep's worker, whose process goes on to other jobs)."""
    for lock in [lock for lock in _held if Path(lock.name) == run_dir / LOCK]:
        _held.remove(lock)
        lock.close()


def in_use(run_dir: Path) -> bool:
    """Whether a training run holds this folder's lock (see claim)."""
    try:
        lock = open(run_dir / LOCK)
    except FileNotFoundError:
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def holds_work(run_dir: Path) -> bool:
    """Whether a run folder holds a file of the run's own: more than Hydra's record of its start and the lock."""
    return any(p.is_file() and p.relative_to(run_dir).parts[0] not in HYDRA_RECORD for p in run_dir.rglob("*"))


def discard_if_never_started(run_dir: Path) -> None:
    """Remove the folder Hydra made for a run that failed before writing anything of its own, and the date
    folder above it if that is left empty: failed configs leave no empty outputs/<date>/<time>/ behind."""
    cwd = Path.cwd().resolve()
    run_dir = run_dir.resolve()
    if run_dir == cwd or cwd.is_relative_to(run_dir) or not run_dir.is_dir():
        return
    if holds_work(run_dir):
        return
    shutil.rmtree(run_dir)
    for parent in run_dir.parents:
        if parent == cwd or not parent.is_relative_to(cwd) or any(parent.iterdir()):
            break
        parent.rmdir()


def discard_claimed_if_never_started() -> None:
    """Let go of each run folder this process claimed, and remove it if its run wrote nothing of its own there (a run
    stopped before it began)."""
    for lock in list(_held):
        run_dir = Path(lock.name).parent
        release(run_dir)
        discard_if_never_started(run_dir)
