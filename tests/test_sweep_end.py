"""How a sweep ends: its exit status says whether a job failed, a crashed job still leaves the report, and Ctrl-C
after the end (joblib spends a few seconds ending its workers at exit) finds no running-jobs handler installed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import train
from gpt.inference.checkpoint import CheckpointError
from gpt.sweeps import parallel
from gpt.sweeps.parallel import JobsPerCore
from gpt.sweeps.runs import find_runs
from gpt.sweeps.sweep_end import WriteReport, sweep_ending
from gpt.training.run_folder import damaged, read_summary
from gpt.training.run_folder_lock import LOCK
from tests.conftest import ROOT, child_env
from tests.test_launchers import sweep_config
from tests.test_report import fake_run, table

TINY = ["trainer=debug", "trainer.max_steps=4", "trainer.val_check_interval=400", "trainer.limit_val_batches=1",
        "data.eval_lines=4", "model.layers=1", "model.dim=32", "logger=none"]
# Imported by every Python process started with its folder on PYTHONPATH: the job of seed 1 crashes as a bug or an
# out-of-memory error would, mid-training.
CRASH = """import torch
import gpt.training.lit as lit

real = lit.LitGPT.training_step


def crashing(self, *args, **kwargs):
    if torch.initial_seed() == 1:
        raise RuntimeError("out of memory (a stand-in)")
    return real(self, *args, **kwargs)


lit.LitGPT.training_step = crashing
"""


def test_a_crashed_job_is_a_failed_row_of_the_report_and_the_sweep_exits_1(tmp_path: Path) -> None:
    """A job raising something other than a configuration mistake once ended the sweep with Hydra's traceback and
    no report, the other jobs' results unsummarised."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(CRASH)
    env = child_env(HYDRA_FULL_ERROR="0")
    env["PYTHONPATH"] = f"{hooks}{os.pathsep}{env['PYTHONPATH']}"
    # One job at a time, in the sweep's own process (one start-up of torch, not one per worker): a job's crash is
    # caught in the job (train.run_job), wherever it runs.
    result = subprocess.run([sys.executable, str(ROOT / "train.py"), "-m", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                             "hydra.launcher.n_jobs=1", *TINY, "seed=0,1"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "1 of 2 jobs failed (their rows in report.md say why): exit status 1" in result.stderr
    assert "RuntimeError: out of memory (a stand-in)" in result.stderr  # the traceback, for whoever debugs it
    # after each job, how far the sweep has got, the crashed job counted as ended (of jobs side by side, the first
    # one's line is left out when the second has ended too by the time it is written)
    progress = [line for line in result.stdout.splitlines() if " jobs done in " in line]
    assert progress and progress[-1].startswith("sweep: all 2 jobs done in 0m"), result.stdout[-2000:]
    assert all(line.startswith("sweep: 1 of 2 jobs done in 0m") for line in progress[:-1]), result.stdout[-2000:]
    rows = table((tmp_path / "sweep" / "report.md").read_text())
    header, row = rows["configuration"], rows[next(k for k in rows if k != "configuration")]
    assert row[header.index("seeds")] == "1"
    assert row[header.index("status")] == "1 of 2 failed: RuntimeError: out of memory (a stand-in)"
    assert json.loads((tmp_path / "sweep" / "0" / "summary.json").read_text())["status"] == "ok"


@pytest.mark.parametrize("statuses, ending", [
    (["ok", "refused"], ("1 of 2 jobs refused as configurations that cannot work (their rows in report.md say why)",
                         0)),
    (["refused", "refused"], ("all 2 jobs were refused (their rows in report.md say why): exit status 1", 1)),
    (["ok", "refused", "failed"], ("1 of 3 jobs failed (their rows in report.md say why): exit status 1", 1)),
    (["ok", "stopped"], ("1 of 2 jobs stopped (their rows in report.md say why; resume=true continues the stopped): "
                         "exit status 1", 1)),
    (["failed", "stopped", "ok"], ("1 of 3 jobs failed, 1 stopped (their rows in report.md say why; resume=true "
                                   "continues the stopped): exit status 1", 1)),
    (["ok", "ok"], None),
])
def test_a_sweep_exits_1_when_a_job_failed_or_none_finished(tmp_path: Path, statuses: list[str],
                                                            ending: tuple[str, int] | None) -> None:
    """A configuration the checks refuse (heads that do not divide dim) beside finished ones is an answer of the
    sweep, as the attention preset's torch_mha under RoPE is; a failed job or nothing finished is not."""
    for job, status in enumerate(statuses):
        fake_run(tmp_path / str(job), [f"seed={job}"], {"status": status, "reason": "why"})
    assert sweep_ending(find_runs(tmp_path)) == ending


def test_ctrl_c_after_the_sweep_ended_is_no_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    """It said running jobs would save for resume=true (there were none), then raised SystemExit inside the
    interpreter's shutdown: 'Exception ignored' with a traceback, and exit status 0."""
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    cfg = sweep_config("seed=0,1", f"hydra.sweep.dir={tmp_path}")
    before = signal.getsignal(signal.SIGINT)
    try:
        callback = JobsPerCore()
        callback.on_multirun_start(cfg)
        callback.on_multirun_end(cfg)
        os.kill(os.getpid(), signal.SIGINT)
        assert "Ctrl-C" not in capsys.readouterr().err
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_sweep_that_cannot_write_its_report_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A finished job's history.csv cut short, its sweep resumed: the report could not be read from the run folders,
    and the sweep said "no report" but exited 0, so `train.py -m ... && next` went on as if it had one (and an
    earlier report.md in the folder stayed, looking current)."""
    finished = {"status": "ok", "params": 100, "val_loss": 1.0, "val_ppl": 3.0, "wall_s": 5.0}
    for seed in (0, 1):
        fake_run(tmp_path / str(seed), [f"seed={seed}"], finished)
    (tmp_path / "1" / "history.csv").write_text("step,wall_s,val_loss\n")
    with pytest.raises(SystemExit) as stop:
        WriteReport().on_multirun_end(sweep_config("seed=0,1", f"hydra.sweep.dir={tmp_path}"))
    assert stop.value.code == 1
    assert capsys.readouterr().err.startswith(f"no report: {tmp_path / '1' / 'history.csv'} is damaged")


def test_a_second_ctrl_c_to_a_sweep_stops_it_at_once_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """The second Ctrl-C, while the first waited for the running jobs to save, raised KeyboardInterrupt through
    joblib and Hydra: thirty lines of traceback after the line that says how to go on."""
    monkeypatch.setattr(parallel, "in_use", lambda folder: True)  # a running job, still finishing its step
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / LOCK).touch()
    before = signal.getsignal(signal.SIGINT)
    try:
        parallel.stop_workers_on_ctrl_c(tmp_path)
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises((SystemExit, KeyboardInterrupt)) as stop:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)
    finally:
        signal.signal(signal.SIGINT, before)
        parallel.stop_file(str(os.getpid())).unlink(missing_ok=True)
    assert isinstance(stop.value, SystemExit) and stop.value.code == 130  # as joblib ends its workers on either
    assert capsys.readouterr().err.splitlines()[-1] == (
        "Ctrl-C again: the sweep stops now, its running jobs without saving; the same command plus resume=true "
        "continues each from its last checkpoint")


@pytest.mark.parametrize("error, status", [
    (CheckpointError("checkpoints/last.ckpt is not a readable torch file (cut short)"), "failed"),
    (damaged(Path("summary.json"), "not a JSON object"), "failed"),
    (ValueError("heads=5 does not divide dim=128"), "refused")])
def test_a_job_stopped_by_a_damaged_file_fails_and_a_mistaken_configuration_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: ValueError, status: str) -> None:
    """A job of a resumed sweep whose last.ckpt was cut short, or whose summary.json was damaged, was recorded as a
    configuration that cannot work: the sweep ended with exit status 0, "failed runs: 0; 1 refused"."""
    def stopped(*args: object) -> None:
        raise error

    monkeypatch.setattr(train, "train", stopped)
    train.run_job(None, tmp_path, multirun=True)
    assert read_summary(tmp_path) == {"status": status, "reason": str(error)}
