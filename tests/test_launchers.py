"""Hydra's launchers as train.py's -m sweeps use them: one job per core on CPU and one at a time on a GPU
(hydra/launcher=cores, the default), SLURM through submitit (hydra/launcher=slurm) composed as a cluster would
receive it. Sweeps through the launcher are run in tests/test_report.py and tests/test_resume.py."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.plugins import Plugins
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from gpt.sweeps import expected_time, parallel
from gpt.sweeps.expected_time import ExpectedTime
from gpt.sweeps.parallel import JobsPerCore, job_count, jobs_at_once
from gpt.training import checks, lightning_checks, precision
from gpt.training import preflight as preflight_module
from gpt.training.preflight import preflight
from gpt.training.run_folder import write_summary
from tests.conftest import ROOT


def starting_sweep() -> contextlib.AbstractContextManager:
    """Hydra initialised on configs/, as while a sweep starts (its callbacks compose the jobs' configs)."""
    return initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3")


def sweep_config(*overrides: str) -> DictConfig:
    """The config a -m sweep starts from (swept keys at their values before the sweep), with Hydra's section."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return GlobalHydra.instance().config_loader().load_configuration("train", list(overrides), RunMode.MULTIRUN)


@pytest.mark.parametrize("overrides, cores, expected", [
    (["seed=0,1,2", "model.heads=1,2"], 4, 4),  # six jobs on four cores: four at a time
    (["seed=0,1"], 16, 2),  # never more than the sweep has jobs
    (["seed=0,1,2,3", "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"], 4, 1),  # spawns its own
    (["seed=0,1,2,3", "trainer=gpu"], 16, 1),  # jobs on a GPU would all land on the first one
])
def test_jobs_at_once_follow_the_cores_and_the_device(overrides: list[str], cores: int, expected: int) -> None:
    cfg = sweep_config(*overrides)
    assert cfg.hydra.launcher.n_jobs == 0  # decided when the sweep starts
    assert jobs_at_once(cfg, job_count(cfg), cores) == expected


@pytest.mark.parametrize("overrides, jobs", [
    (["data.tasks.calculator.operations=[plus],[times]"], 2),  # two lists, one job each
    (["data.tasks.calculator.operations=[plus,minus]", "seed=0,1"], 2),  # one list: one value
    (["seed=range(0,3)"], 3),
    (["seed=choice(0,1)"], 2),
    (["callbacks.sample.prompt='one,two'"], 1),  # a quoted comma is one value
])
def test_sweep_jobs_are_counted_as_hydra_sweeps_them(overrides: list[str], jobs: int) -> None:
    """The count decides how many jobs run at once: a sweep of lists counted as one job ran one at a time."""
    assert job_count(sweep_config(*overrides)) == jobs


def test_sweeps_use_the_cores_launcher_unless_told() -> None:
    cfg = sweep_config("seed=0,1")
    assert cfg.hydra.launcher._target_ == "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
    assert sweep_config("hydra/launcher=basic", "seed=0,1").hydra.launcher._target_.endswith("BasicLauncher")


def test_slurm_launcher_composes_with_ddp_for_several_gpus_per_job() -> None:
    """Composed against the plugin's own schema, so a key it does not know fails here; no cluster to submit to."""
    cfg = sweep_config("hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=4",
                       "hydra.launcher.tasks_per_node=4", "trainer=ddp", "trainer.strategy=ddp", "trainer.devices=4",
                       "seed=0,1,2")
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=False)
    assert launcher["_target_"] == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (launcher["partition"], launcher["gpus_per_node"], launcher["tasks_per_node"]) == ("gpu", 4, 4)
    assert launcher["timeout_min"] > 0 and launcher["submitit_folder"].startswith("${hydra.sweep.dir}")
    assert (cfg.trainer.strategy, cfg.trainer.devices) == ("ddp", 4)
    assert job_count(cfg) == 3


def test_a_slurm_sweep_off_a_cluster_is_one_line_and_no_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    """submitit's answer was thirty lines of traceback ending 'Could not detect "srun"', after the sweep's folder was
    made; on a cluster's login node the same command goes on to submit."""
    monkeypatch.chdir(tmp_path)
    argv = ["-m", "hydra/launcher=slurm", "seed=0,1"]
    monkeypatch.setattr(preflight_module.shutil, "which", lambda tool: None)
    with pytest.raises(SystemExit):
        preflight(argv, ROOT / "configs", checks.check_config, claim=True)
    assert capsys.readouterr().err == "error: hydra/launcher=slurm sends each job to SLURM, and this machine has no " \
        "sbatch or srun: run the command on the cluster's login node, or drop hydra/launcher=slurm to run the sweep " \
        "here\n"
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(preflight_module.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    assert preflight(argv, ROOT / "configs", checks.check_config, claim=True) == argv


def test_a_slurm_sweep_without_the_cluster_extra_names_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    """Without hydra-submitit-launcher the sweep was refused as 'hydra/launcher=submitit_slurm is not an option of
    hydra/launcher: choose one of basic, cores, joblib, slurm', an option no one typed, and slurm among the choices."""
    Plugins.instance()  # the installed plugins' configs are in Hydra's store once it has looked for plugins
    launchers = ConfigStore.instance().repo["hydra"]["launcher"]
    monkeypatch.delitem(launchers, "submitit_slurm.yaml")  # as where the plugin is not installed
    monkeypatch.delitem(launchers, "submitit_local.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        preflight(["-m", "hydra/launcher=slurm", "seed=0,1"], ROOT / "configs", checks.check_config, claim=True)
    assert capsys.readouterr().err == "error: hydra/launcher=slurm needs hydra-submitit-launcher, which is not " \
        'installed here: pip install -e ".[cluster]"\n'
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("override, refusal", [
    ("hydra.launcher.n_jobs=two", "hydra.launcher.n_jobs=two: Value 'two' of type 'str' could not be converted to "
                                  "Integer"),
    ("hydra.job.chdir=maybe", "hydra.job.chdir=maybe: Value 'maybe' is not a valid bool (type str)"),
])
def test_a_value_of_the_wrong_type_for_a_hydra_setting_is_named_as_such(
        override: str, refusal: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    """Refused as 'hydra.launcher.n_jobs is not a setting of hydra.launcher; did you mean hydra.launcher.n_jobs?'."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        preflight(["-m", override, "seed=0,1"], ROOT / "configs", checks.check_config, claim=True)
    assert capsys.readouterr().err == f"error: {refusal}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("settings, refused", [
    ({"devices": 2}, True),  # strategy=auto picks Lightning's ddp, which re-runs the command line
    ({"devices": 2, "strategy": "ddp"}, True),
    ({"devices": 2, "strategy": "ddp_spawn"}, False),  # trainer=ddp's: started from inside the job
    ({"devices": 1}, False),
])
def test_a_sweep_job_on_processes_that_re_run_the_command_is_refused(settings: dict[str, Any], refused: bool) -> None:
    """Under -m, `trainer.devices=2` alone made the second process run the whole sweep again: each job trained twice
    at once into the same folder and the report was written twice. A single run re-run that way is one run."""
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, **settings)
    strategy = settings.get("strategy", "auto")
    lightning_checks.check_launch(trainer, strategy, in_sweep=False)
    if not refused:
        lightning_checks.check_launch(trainer, strategy, in_sweep=True)
        return
    with pytest.raises(ValueError, match=f"trainer.strategy={strategy} on 2 processes .* re-runs the whole sweep: "
                                         "pass trainer.strategy=ddp_spawn"):
        lightning_checks.check_launch(trainer, strategy, in_sweep=True)


def test_the_expected_time_counts_the_jobs_that_run_at_once(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cfg = sweep_config("experiment=attention_tasks", "attention=mha,gqa,mqa", "seed=0,1")
    JobsPerCore().on_multirun_start(cfg)
    with starting_sweep():
        ExpectedTime(seconds_per_job=30, steps=cfg.trainer.max_steps, measured="a test").on_multirun_start(cfg)
    assert capsys.readouterr().out.splitlines() == [
        "sweep: 6 jobs, 2 at a time (2 cores), 1 thread(s) each",
        "expected wall time: 6 jobs x ~30 s, 2 at a time = ~2 min (a test)"]
    one = sweep_config("experiment=attention_tasks", "attention=mha", "seed=0")
    with starting_sweep():
        ExpectedTime(seconds_per_job=30, steps=one.trainer.max_steps, measured="a test").on_multirun_start(one)
    assert capsys.readouterr().out.splitlines() == ["expected wall time: 1 job x ~30 s, 1 at a time = ~30 s (a test)"]


def test_the_expected_time_counts_a_job_its_checks_refuse_as_none(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """attention_tasks trains every variant with RoPE, which attention=torch_mha refuses in its job before training:
    the estimate counted its jobs as jobs that train."""
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    cfg = sweep_config("experiment=attention_tasks", "attention=mha,torch_mha,gqa", "seed=0,1")
    alone = sweep_config("experiment=attention_tasks", "attention=torch_mha", "seed=0,1")
    JobsPerCore().on_multirun_start(cfg)
    with starting_sweep():
        ExpectedTime(seconds_per_job=30, steps=cfg.trainer.max_steps, measured="a test").on_multirun_start(cfg)
        assert capsys.readouterr().out.splitlines()[-1] == \
            "expected wall time: 4 jobs (2 more refused for their model before training, ~0 s) x ~30 s, 2 at a " \
            "time = ~60 s (a test)"
        ExpectedTime(seconds_per_job=30, steps=cfg.trainer.max_steps, measured="a test").on_multirun_start(alone)
    assert capsys.readouterr().out.splitlines()[-1] == \
        "expected wall time: none, of 2 jobs 2 more refused for their model before training, ~0 s"


# 30 s a job measured at 1,200 steps: 2.5 s of setup (JOB_SETUP_S) and 27.5 s that scale with the steps
@pytest.mark.parametrize("steps, per_job", [("trainer.max_steps=2400", 58), ("trainer.max_steps=600", 16),
                                            ("trainer.max_steps=600,3000", 44)])
def test_the_expected_time_scales_with_the_steps_the_jobs_train(steps: str, per_job: int,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture) -> None:
    """Measured at 1,200 steps a job; a command line that trains longer or shorter moves the estimate with it
    (a 40-step sweep of the preset was estimated at 2 s a job: its setup had been scaled down with its steps)."""
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    cfg = sweep_config("experiment=attention_tasks", "attention=mha,gqa", "seed=0", steps)
    jobs = 2 * (2 if "," in steps else 1)
    JobsPerCore().on_multirun_start(cfg)
    with starting_sweep():
        ExpectedTime(seconds_per_job=30, steps=1200, measured="a test").on_multirun_start(cfg)
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith(f"expected wall time: {jobs} jobs x ~{per_job} s") and "measured at 1,200" in line


@pytest.mark.parametrize("bf16, maker, measured_on", [(True, "AuthenticAMD", "AMD EPYC"),
                                                     (True, "GenuineIntel", "Intel Xeon with AMX"),
                                                     (False, "GenuineIntel", "no AMX")])
def test_the_expected_time_of_an_auto_precision_preset_is_the_one_measured_in_the_precision_auto_picks(
        bf16: bool, maker: str, measured_on: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """attention_tasks trains in the precision the CPU is faster in: its estimate is the one timed in that precision
    (on an AMD EPYC in bf16 the preset took 10 min where the fp32 figure said 18), and on that maker's CPU where bf16
    was timed on both (an Intel Xeon with AMX took 2.3x the EPYC's time a job, where the EPYC's figure said ~8 min)."""
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(precision, "cpu_trains_faster_in_bf16", lambda: bf16)
    monkeypatch.setattr(expected_time, "cpu_info", lambda key: {"vendor_id": maker}[key])
    for overrides in ([], ["trainer.precision=32"]):  # auto, then fp32 asked for: fp32's figure whatever the CPU
        cfg = sweep_config("experiment=attention_tasks", "attention=mha", *overrides)
        JobsPerCore().on_multirun_start(cfg)
        with starting_sweep():
            instantiate(cfg.hydra.callbacks.expected_time).on_multirun_start(cfg)
        line = capsys.readouterr().out.splitlines()[-1]
        timed = cfg.hydra.callbacks.expected_time.seconds_per_job
        in_bf16 = timed["bf16-mixed"]
        assert len({in_bf16.AuthenticAMD, in_bf16.GenuineIntel, timed["32-true"]}) == 3  # else a line could not tell
        expected = in_bf16[maker] if bf16 and not overrides else timed["32-true"]
        assert f"jobs x ~{expected} s, 2 at a time" in line
        assert measured_on in line if not overrides else "no AMX" in line


def test_the_expected_time_counts_a_job_that_repeats_another_as_none(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """`attention=mha,sliding_window ++model.window=4,8`: each mha job at window 8 repeats its run at window 4 and is
    recorded without training, but the estimate counted it as a job that trains."""
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    overrides = ["experiment=attention_ablation", "attention=mha,sliding_window", "++model.window=4,8", "seed=0,1,2"]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):  # as while a sweep starts
        cfg = GlobalHydra.instance().config_loader().load_configuration("train", overrides, RunMode.MULTIRUN)
        JobsPerCore().on_multirun_start(cfg)
        ExpectedTime(seconds_per_job=30, steps=cfg.trainer.max_steps, measured="a test").on_multirun_start(cfg)
    assert capsys.readouterr().out.splitlines()[-1] == \
        "expected wall time: 9 jobs (3 more repeating another job's run, not trained) x ~30 s, 2 at a time = " \
        "~2 min (a test)"


def test_no_expected_time_for_steps_that_are_not_a_number(capsys: pytest.CaptureFixture) -> None:
    """A mistyped trainer.max_steps gets no estimate (and no traceback); each job refuses it in one line."""
    cfg = sweep_config("experiment=attention_tasks", "trainer.max_steps=abc")
    with starting_sweep():
        ExpectedTime(seconds_per_job=30, steps=1200, measured="a test").on_multirun_start(cfg)
    assert "expected wall time" not in capsys.readouterr().out


def test_a_resumed_sweep_expects_only_the_jobs_it_has_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    """resume=true keeps the jobs that finished before; the estimate counts the others (a failed or interrupted
    job runs again, so it counts, as does one killed before its model.pt, which is finished again)."""
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    for job, status in enumerate(["ok", "ok", "ok", "failed"]):
        write_summary(tmp_path / str(job), {"status": status})
        if job < 2:
            torch.save({}, tmp_path / str(job) / "model.pt")  # an empty file is a damaged model.pt
    cfg = sweep_config("experiment=attention_tasks", "attention=mha,gqa", "seed=0,1,2", "resume=true",
                       f"hydra.sweep.dir={tmp_path}")
    JobsPerCore().on_multirun_start(cfg)
    with starting_sweep():
        ExpectedTime(seconds_per_job=30, steps=1200, measured="a test").on_multirun_start(cfg)
    assert capsys.readouterr().out.splitlines()[-1] == \
        "expected wall time: 4 jobs left (2 finished before, kept) x ~30 s, 2 at a time = ~60 s (a test)"
