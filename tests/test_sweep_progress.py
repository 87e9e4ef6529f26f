"""A sweep's line after each job: how many of its jobs have ended, since when, and at this pace how long the rest
take. The 33-job attention_tasks preset expected ~9 min from the figure measured on another CPU and was on course for
~20, which nothing said until it ended. Run through a real sweep in tests/test_sweep_end.py."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import JobReturn
from hydra.types import RunMode

from gpt.sweeps.progress import SweepProgress, progress_line
from gpt.training.run_folder import SUMMARY, write_summary
from tests.conftest import ROOT

STARTED = 1000.0  # when the sweep under test started


def ended(sweep: Path, job: int, status: str, at: float) -> Path:
    """Job `job` of the sweep recorded as `status` at time `at` (finished runs with their model.pt)."""
    run = sweep / str(job)
    write_summary(run, {"status": status})
    if status == "ok":
        torch.save({}, run / "model.pt")
    os.utime(run / SUMMARY, (at, at))
    return run


def test_the_first_job_says_how_many_ended_and_the_pace_waits_for_one_round(tmp_path: Path) -> None:
    """Two at a time: when the first job ends the other is part done, so its pace would read twice as slow."""
    first = ended(tmp_path, 0, "ok", 1035)
    assert progress_line(tmp_path, first, jobs=6, at_once=2, started=STARTED, now=1035) == \
        "sweep: 1 of 6 jobs done in 0m35s"
    second = ended(tmp_path, 1, "failed", 1036)  # a failed job trained as long as it lasted
    assert progress_line(tmp_path, second, jobs=6, at_once=2, started=STARTED, now=1036) == \
        "sweep: 2 of 6 jobs done in 0m36s; at this pace ~72 s left"


def test_jobs_that_train_nothing_are_done_but_do_not_set_the_pace(tmp_path: Path) -> None:
    ended(tmp_path, 0, "ok", 1060)
    ended(tmp_path, 1, "ok", 1061)
    ended(tmp_path, 2, "duplicate", 1062)
    refused = ended(tmp_path, 3, "refused", 1063)
    assert progress_line(tmp_path, refused, jobs=40, at_once=2, started=STARTED, now=1063) == \
        "sweep: 4 of 40 jobs done in 1m03s; at this pace ~19 min left"  # 36 x 63 s / 2 trained


def test_a_resumed_sweep_counts_its_kept_jobs_done_and_paces_only_the_jobs_it_ran(tmp_path: Path) -> None:
    """Kept jobs end in no time: counted in the pace, three of them would make it look many times faster. A job
    that failed or stopped before has not ended: resume=true runs it again."""
    kept = [ended(tmp_path, job, "ok", 500) for job in (0, 1, 2)]
    ended(tmp_path, 3, "failed", 600)
    ended(tmp_path, 4, "stopped", 700)
    # A kept job's own line says it was kept: a line each, 17 kept jobs printed 17 near-same lines
    assert progress_line(tmp_path, kept[0], jobs=8, at_once=1, started=STARTED, now=1001) is None
    again = ended(tmp_path, 3, "ok", 1050)
    assert progress_line(tmp_path, again, jobs=8, at_once=1, started=STARTED, now=1050) == \
        "sweep: 4 of 8 jobs done (3 kept from before) in 0m50s; at this pace ~3 min left"  # 4 x 50 s


def test_a_job_continued_from_its_checkpoint_counts_for_the_part_it_trained(tmp_path: Path) -> None:
    """A job that resume=true continued from halfway trained half a job in this sweep: counted whole, the pace read
    twice as fast as the jobs left will go."""
    for job in (0, 1, 2):
        ended(tmp_path, job, "ok", 500)
    continued = ended(tmp_path, 3, "ok", 1050)
    write_summary(continued, {"status": "ok", "steps": 100, "resumed_at": 50})
    os.utime(continued / SUMMARY, (1050, 1050))
    assert progress_line(tmp_path, continued, jobs=8, at_once=1, started=STARTED, now=1050) == \
        "sweep: 4 of 8 jobs done (3 kept from before) in 0m50s; at this pace ~7 min left"  # 4 x 50 s / half a job


def test_no_pace_once_every_job_left_is_running(tmp_path: Path) -> None:
    """Each of them part done: a pace of whole jobs would say they take as long again."""
    for job in range(4):
        ended(tmp_path, job, "ok", 1100 + job)
    last = ended(tmp_path, 4, "ok", 1200)
    assert progress_line(tmp_path, last, jobs=6, at_once=2, started=STARTED, now=1200) == \
        "sweep: 5 of 6 jobs done in 3m20s"
    end = ended(tmp_path, 5, "ok", 1230)
    assert progress_line(tmp_path, end, jobs=6, at_once=2, started=STARTED, now=1230) == \
        "sweep: all 6 jobs done in 3m50s"


def test_a_sweep_of_one_job_says_its_one_job_is_done(tmp_path: Path) -> None:
    """It said `sweep: all 1 jobs done`."""
    only = ended(tmp_path, 0, "ok", 1030)
    assert progress_line(tmp_path, only, jobs=1, at_once=1, started=STARTED, now=1030) == \
        "sweep: its 1 job done in 0m30s"


def test_of_two_jobs_ending_together_the_later_one_says_it(tmp_path: Path) -> None:
    """Each counts the other once both records are written: the same line twice."""
    one, other = ended(tmp_path, 0, "ok", 1040), ended(tmp_path, 1, "ok", 1041)
    assert progress_line(tmp_path, one, jobs=4, at_once=2, started=STARTED, now=1042) is None
    assert progress_line(tmp_path, other, jobs=4, at_once=2, started=STARTED, now=1042) == \
        "sweep: 2 of 4 jobs done in 0m42s; at this pace ~42 s left"


def test_two_jobs_ending_at_once_and_a_damaged_record_break_nothing(tmp_path: Path) -> None:
    one, other = ended(tmp_path, 0, "ok", 1040), ended(tmp_path, 1, "ok", 1040)
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / SUMMARY).write_text("{cut sh")  # the report names it; here it is no job that ended
    lines = {progress_line(tmp_path, run, jobs=4, at_once=2, started=STARTED, now=1040) for run in (one, other)}
    assert lines == {"sweep: 2 of 4 jobs done in 0m40s; at this pace ~40 s left"}


@pytest.mark.parametrize("status, at", [("stopped", 1050), ("failed", 900)])
def test_no_line_for_a_job_that_did_not_end_in_this_sweep(tmp_path: Path, status: str, at: float) -> None:
    """Stopped (Ctrl-C: the sweep is stopping), or an earlier attempt's record (another run held the folder)."""
    run = ended(tmp_path, 0, status, at)
    assert progress_line(tmp_path, run, jobs=2, at_once=2, started=STARTED, now=1050) is None


def test_a_single_run_says_nothing_of_a_sweep(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = GlobalHydra.instance().config_loader().load_configuration(
            "train", [f"hydra.run.dir={tmp_path}"], RunMode.RUN)
    write_summary(tmp_path, {"status": "ok"})
    SweepProgress().on_job_end(cfg, JobReturn())
    assert capsys.readouterr().out == ""
