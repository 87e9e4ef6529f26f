"""After each job of a -m sweep, one line of how far the sweep has got: `sweep: 12 of 33 jobs done in 9m20s; at this
pace ~11 min left`. The expected-time line before the first job is a figure measured on another CPU, which can be
twice off; this one is read from the sweep folder as it fills. Jobs run in joblib's worker processes, which tell the
sweep's process nothing as each ends, so each job counts for itself, at its own end: the jobs whose summary.json says
they ended since the sweep started, those a resumed sweep keeps from before, and the pace of the jobs that trained
since then."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from gpt.sweeps.expected_time import roughly
from gpt.sweeps.lock import sweep_started
from gpt.sweeps.parallel import decided_at_once, sweep_sizes
from gpt.sweeps.repeats import recorded_sweep
from gpt.training.run_folder import SUMMARY, kept_on_resume, read_summary
from gpt.training.run_record import clock

ENDED = {"ok", "failed", "refused", "duplicate"}  # not "stopped": resume=true continues a stopped job
TRAINED = {"ok", "failed"}  # a refused or duplicate job ends in a second or two, which is no pace for the others


def records(sweep_dir: Path) -> dict[Path, tuple[float, str | None, float]]:
    """Each job folder's summary.json under the sweep folder, read once: when it was written, the status it says and
    the share of its steps it trained in its last session (less than 1 for a job continued from its checkpoint); a
    damaged or vanished one is left out: the report names a damaged record."""
    found = {}
    for record in sweep_dir.rglob(SUMMARY):
        try:
            at, summary = record.stat().st_mtime, read_summary(record.parent) or {}
        except (OSError, ValueError):
            continue
        share = 1 - summary.get("resumed_at", 0) / summary["steps"] if summary.get("steps") else 1.0
        found[record.parent.resolve()] = (at, summary.get("status"), share)
    return found


def progress_line(sweep_dir: Path, run_dir: Path, jobs: int, at_once: int, started: float, now: float) -> str | None:
    """The line for the job in `run_dir` of a sweep of `jobs` jobs, `at_once` at a time, started at `started`; None
    when that job did not end in this sweep (it stopped with the sweep, another run held its folder, or resume=true
    kept it from before: its own line says so, and 17 kept jobs printed 17 near-same lines), or when a job that ended
    after it will say as much: two jobs ending together printed the same line twice."""
    found = records(sweep_dir)
    # an earlier attempt's record does not count: resume=true runs a failed or stopped job again
    here = {run: at for run, (at, status, _) in found.items() if at >= started and status in ENDED}
    kept = sum(at < started and kept_on_resume(run) for run, (at, _, _) in found.items())
    own = here.get(run_dir.resolve())
    if own is None or max(here.values()) > own:
        return None
    done, elapsed = min(jobs, len(here) + kept), now - started
    before = f" ({kept} kept from before)" if kept else ""
    if done == jobs:
        return f"sweep: {'its 1 job' if jobs == 1 else f'all {jobs} jobs'} done{before} in {clock(elapsed)}"
    line = f"sweep: {done} of {jobs} jobs done{before} in {clock(elapsed)}"
    # a job only finished here (killed after its final checkpoint) trained none of its steps: no pace either
    trained = [found[run][2] for run in here if found[run][1] in TRAINED and found[run][2] > 0]
    left = jobs - done
    # Before a round of jobs has ended, the others running part done make the pace look slower than it is; once
    # fewer jobs are left than run at once, each of them is running, part done, and the pace would count them whole.
    if len(trained) >= at_once and left >= at_once:
        line += f"; at this pace {roughly(left * elapsed / sum(trained))} left"
    return line


class SweepProgress(Callback):
    """configs/train.yaml: its on_job_end runs in the process that ran the job (a joblib worker, or the sweep's own
    for one at a time), after the job; a single run prints nothing."""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        started, sweep = sweep_started(sweep_dir), recorded_sweep(sweep_dir)
        if started is None or not sweep:  # a folder no sweep of train.py made: nothing says when it started
            return
        jobs = math.prod(sweep_sizes({}, sweep).values())
        line = progress_line(sweep_dir, Path(config.hydra.runtime.output_dir), jobs, decided_at_once(config, jobs),
                             started, time.time())
        if line:
            print(line, flush=True)
