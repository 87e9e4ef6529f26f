"""A sweep's jobs that differ only in a `++` setting their model reads nowhere are one run: `-m
attention=mha,sliding_window ++model.window=4,8` trained mha twice, identically, and reported it as two
configurations, `attention=mha model.window=4` and `... model.window=8`, as if the window had been tried on it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpt.model.config import ModelConfig
from gpt.sweeps.repeats import repeated
from gpt.sweeps.report import markdown
from gpt.sweeps.runs import find_runs
from gpt.sweeps.sweep_end import sweep_ending
from gpt.training.model_settings import check_settings_read, forced_unread, model_accepts
from tests.conftest import run_cli
from tests.test_configs import compose_with
from tests.test_report import fake_run, table
from tests.test_sweep_end import TINY


@pytest.mark.parametrize("ignored, sweep, same", [
    (["++model.window=4"], ["attention=mha,sliding_window", "++model.window=4,8"], []),  # the first value runs
    (["++model.window=8"], ["attention=mha,sliding_window", "++model.window=4,8"], ["++model.window=4"]),
    (["++model.window=8"], ["++model.window=range(4,12,4)"], ["++model.window=4"]),
    (["++model.window=8"], ["++model.window=8"], []),  # not swept: no other job to repeat
    # two ignored settings: the job with both at their first values runs
    (["++model.window=4", "++model.rope_base=500"], ["++model.window=4,8", "++model.rope_base=100,500"],
     ["++model.rope_base=100"]),
    # a preset's sweeper params (listed first) and the command line's sweep of the same key, which replaces them
    (["++model.window=8"], ["++model.window=2,4", "++model.window=8,16"], []),
])
def test_a_job_repeats_the_one_at_the_first_value_of_each_setting_it_ignores(ignored: list[str], sweep: list[str],
                                                                              same: list[str]) -> None:
    assert repeated(ignored, sweep) == same


def test_a_job_never_repeats_one_its_model_refuses() -> None:
    """`-m attention=mha,torch_mha ++model.qk_norm=true,false`: torch_mha refuses qk_norm=true and reads no qk_norm
    otherwise, so its job at false was recorded as a duplicate of the refused job, and torch_mha never trained."""
    sweep = ["attention=mha,torch_mha", "++model.qk_norm=True,False"]
    job = ["attention=torch_mha", "++model.qk_norm=False"]
    cfg = compose_with(*job)
    ignored = forced_unread(cfg, job)
    assert ignored == ["++model.qk_norm=False"]
    assert not model_accepts(cfg, "++model.qk_norm=True") and model_accepts(cfg, "++model.qk_norm=False")
    assert repeated(ignored, sweep, lambda override: model_accepts(cfg, override)) == []
    # a third value repeats the first one the model accepts
    assert repeated(["++model.window=8"], ["++model.window=0,4,8"], lambda o: o != "++model.window=0") == \
        ["++model.window=4"]


def test_a_refused_sweep_job_advises_the_sweeps_values_not_its_own() -> None:
    """Each refused alibi job of `-m pos=rope,alibi model.rope_base=100,10000` advised ++ with its own value, and the
    sweep written as told lost the other one."""
    with pytest.raises(ValueError, match=r"give it to all as \+\+model.rope_base=100,10000\)$"):
        check_settings_read({"rope_base": 10000}, ModelConfig(vocab_size=5, pos="alibi"),
                            ["pos=rope,alibi", "model.rope_base=100,10000"])


def test_a_duplicate_never_stands_for_the_run_it_repeats(tmp_path: Path) -> None:
    """The job that ran failed: its row says why, not that its duplicate repeated it; and a duplicate is no failed
    job that makes the sweep exit 1."""
    fake_run(tmp_path / "0", ["attention=mha", "++model.window=4"],
             {"status": "failed", "reason": "boom", "ignores": ["++model.window=4"]})
    fake_run(tmp_path / "1", ["attention=mha", "++model.window=8"],
             {"status": "duplicate", "reason": "the same run", "ignores": ["++model.window=8"]})
    fake_run(tmp_path / "2", ["attention=gqa", "++model.window=4"], {"status": "ok", "params": 1, "val_loss": 1.0})
    rows = table(markdown(tmp_path, find_runs(tmp_path)))
    assert rows["attention=mha"][-1] == "failed: boom"
    assert sweep_ending(find_runs(tmp_path))[0].startswith("1 of 2 jobs failed")


def test_a_sweep_trains_a_run_once_and_reports_it_once(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    # One job at a time, in the sweep's own process (one start-up of torch, not one per worker): which job repeats
    # which is read off the sweep's overrides, whatever runs beside it.
    command = ["train.py", "-m", f"hydra.sweep.dir={sweep}", "hydra.launcher.n_jobs=1", *TINY,
               "attention=mha,sliding_window", "++model.window=4,8"]
    result = run_cli(*command, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    records = {job.name: json.loads((job / "summary.json").read_text()) for job in sweep.iterdir() if job.is_dir()}
    assert [records[job]["status"] for job in "0123"] == ["ok", "duplicate", "ok", "ok"]
    assert records["1"]["reason"] == "the same run as the job with ++model.window=4: a model of attention=mha, " \
        "pos=learned reads no model.window"
    assert not (sweep / "1" / "model.pt").exists() and not (sweep / "1" / "checkpoints").exists()
    report = (sweep / "report.md").read_text()
    rows = table(report)
    assert set(rows) == {"configuration", "attention=mha", "++model.window=4 attention=sliding_window",
                         "++model.window=8 attention=sliding_window"}
    assert "Runs: 3 (1 more left out: 1 not trained, as the same run as another job" in report
    # resumed, the sweep keeps its finished jobs and its duplicate, and writes the same report
    finished = {job: (sweep / job / "summary.json").stat().st_mtime_ns for job in "023"}
    result = run_cli(*command, "resume=true", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert {job: (sweep / job / "summary.json").stat().st_mtime_ns for job in "023"} == finished
    assert json.loads((sweep / "1" / "summary.json").read_text())["status"] == "duplicate"
    assert table((sweep / "report.md").read_text()) == rows
