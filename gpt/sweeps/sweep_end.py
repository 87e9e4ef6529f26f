"""How a -m sweep ends: the Hydra callback that turns a job that raised into a failed run, writes the report when
the multirun ends, and exits 1 if a job failed or the report cannot be written."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gpt.sweeps.report import write_report
from gpt.sweeps.runs import Run, find_runs
from gpt.training.run_folder import record_failure


def sweep_ending(runs: list[Run]) -> tuple[str, int] | None:
    """The line that ends a sweep with something to say, and its exit status: 1 when a job failed or none
    finished, as a failed single run exits nonzero; refused configurations beside finished ones are answers."""
    runs = [r for r in runs if not r.duplicate]  # each is another job's run, which answers for it
    failed = [r for r in runs if not r.ok and not r.refused and not r.stopped]
    stopped = [r for r in runs if r.stopped]
    refused = [r for r in runs if r.refused]
    where = "their rows in report.md say why"
    if failed or stopped or (refused and len(refused) == len(runs)):
        what = f"{len(failed)} of {len(runs)} jobs failed" if failed else \
            f"{len(stopped)} of {len(runs)} jobs stopped" if stopped else f"all {len(runs)} jobs were refused"
        if failed and stopped:
            what += f", {len(stopped)} stopped"
        if stopped:
            where += "; resume=true continues the stopped"
        return f"{what} ({where}): exit status 1", 1
    if refused:
        return f"{len(refused)} of {len(runs)} jobs refused as configurations that cannot work ({where})", 0
    return None


class WriteReport(Callback):
    """Hydra callback (configs/train.yaml): a job that raised becomes a failed run, and when a multirun
    ends its report is written into the sweep folder (each configuration at its best of `best_of`, if set) and the
    sweep exits 1 if a job failed or the report cannot be written."""

    def __init__(self, best_of: Sequence[str] = ()) -> None:
        self.best_of = list(best_of)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if job_return.status == JobStatus.FAILED:
            try:
                job_return.return_value  # re-raises the job's exception
            except Exception as err:
                record_failure(Path(config.hydra.runtime.output_dir), err)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            print(f"report: {write_report(config.hydra.sweep.dir, self.best_of)}")
        except ValueError as err:  # a run's damaged record; hydra.output_subdir=null left no overrides to group by
            print(f"no report: {err}", file=sys.stderr)
            raise SystemExit(1) from None  # `train.py -m ... && next` must not go on as if the sweep had its report
        ending = sweep_ending(find_runs(Path(config.hydra.sweep.dir)))
        if ending:
            line, code = ending
            print(line, file=sys.stderr)
            if code:
                raise SystemExit(code)  # not an Exception: Hydra would turn one raised here into a warning
