"""A new user's first hour, each trap that once gave a wrong result or a wall of text: every bad value or typo'd key
is one line before any work and leaves no run folder; generate.py says which model answers and prints exactly what
the text API returns; `python -m gpt evaluate` refuses what it cannot grade honestly; a debugging switch does not
travel (the README's Python snippet is run in tests/test_docs.py)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from lightning.pytorch.callbacks import Timer
from omegaconf import DictConfig

import generate
import train
from gpt import ModelConfig, load
from gpt.__main__ import main as cli
from gpt.data.tokenizers.vocab import CharTokenizer, WordTokenizer
from gpt.inference.checkpoint import load_checkpoint, save_model
from gpt.training.checks import check_config
from gpt.training.composition import compose_train, parsed
from gpt.training.preflight import preflight
from gpt.training.recorded import as_typed
from gpt.training.resume import resume_from
from gpt.training.run_folder_lock import release
from gpt.training.section_values import trainer_arguments
from tests.conftest import ROOT, build, child_env, files_in, run_cli
from tests.fuzzing import call, job
from tests.test_configs import compose_with
from train import CONFIGS


BAD = [  # (command line, what the one line must say)
    (["model.bias=no"], "model.bias=no must be true or false"),
    (["model.qk_norm=maybe"], "model.qk_norm=maybe must be true or false"),
    (["model.dropout=high"], "model.dropout=high must be a number in [0, 1)"),
    (["model.layers=0"], "model.layers=0 must be a positive integer"),
    (["model.heads=5"], "heads=5 does not divide dim=128"),
    (["trainer.max_steps=abc"], "trainer.max_steps=abc must be a positive integer"),
    (["trainer.precision=fp8"], "trainer.precision=fp8 must be one of "),
    (["data.batch_size=0"], "data.batch_size=0 must be a positive integer"),
    (["data.tasks.calculator.val_fraction=1.5"], "data.tasks.calculator.val_fraction=1.5 must be a number in (0, 1)"),
    (["optim.lr=-1"], "optim.lr=-1 must be a number > 0"),
    (["optim.betas=[0.9]"], "optim.betas=[0.9] must be a list of 2, each a number in [0, 1)"),  # said "a list"
    (["callbacks.checkpoint.every_n_steps=0"], "callbacks.checkpoint.every_n_steps=0 must be a positive integer"),
    (["callbacks.sample.temperature=hot"], "callbacks.sample.temperature=hot must be a number >= 0"),
    (["compile=maybe"], "compile=maybe must be true or false"),
    (["seed=1.5"], "seed=1.5 must be an integer"),
    (["model.head=4"], "model.head is not a setting of model=small; did you mean model.heads?"),
    (["trainer.max_step=10"], "trainer.max_step is not a setting of trainer=default; did you mean trainer.max_steps?"),
    (["sed=3"], "sed is not a setting; did you mean seed?"),
    (["data.nope=x"], "data.nope is not a setting of data=calculator; its settings: tasks, seed, "),
    # a key that only another option's file adds names that option, not a near key that is no fix
    (["data.path=x"], "data.path is a setting of data=text or data=shakespeare, and this command has data=calculator: "
                      "add data=text\n"),
    (["model.kv_heads=2"], "model.kv_heads is a setting of attention=gqa, and this command has attention=mha: "
                           "add attention=gqa"),
    (["attention=mqa", "model.kv_heads=2"], "this command has attention=mqa: add attention=gqa"),
    (["model.window=4"], "model.window is a setting of attention=sliding_window, "),
    # a second such key made the first "not a setting"
    (["model.window=4", "model.kv_heads=2"], "model.kv_heads is a setting of attention=gqa, and this command has "
                                             "attention=mha: add attention=gqa"),
    (["-m", "attention=mha,gqa,sliding_window", "model.window=4", "model.kv_heads=2"],
     "model.kv_heads is a setting of attention=gqa, and this sweep has a job with attention=mha: write "
     "++model.kv_heads=2"),
    (["model.kv_latent_dim=8"], "model.kv_latent_dim is a setting of attention=mla, "),
    # a task the composed data lacks: "data.tasks.copy is not a setting", naming neither the key nor its option
    (["data=recall", "data.tasks.copy.length=8"], "data.tasks.copy.length is a setting of data=copy or data=tasks, "
     "and this command has data=recall: add data=copy, or data=[recall,copy] to keep data=recall beside it\n"),
    (["data.tasks.recall.pairs=4"], "data.tasks.recall.pairs is a setting of data=recall or data=tasks, and this "
     "command has data=calculator: add data=recall, or data=[calculator,recall] to keep data=calculator beside it"),
    (["data=[recall,distance]", "data.tasks.copy.length=8"], "data.tasks.copy.length is a setting of data=copy or "
     "data=tasks, and this command has data=[recall,distance]: add data=copy, or data=[recall,distance,copy] to keep "
     "data=[recall,distance] beside it"),
    (["data=text", "data.tasks.copy.length=8"], "data.tasks.copy.length is a setting of data=copy or data=tasks, and "
     "this command has data=text: add data=copy\n"),  # a text corpus and a task do not mix
    (["data=recall", "data.tasks.copy.lenght=8"], "data.tasks.copy is a setting of data=copy or data=tasks, "),
    # a typo'd task that only another option has: the line listed data=recall's tasks and named no copy
    (["data=recall", "data.tasks.copyy.length=8"], "error: data.tasks.copyy is not a setting of data.tasks; did you "
     "mean data.tasks.copy? data.tasks.copy.length is a setting of data=copy or data=tasks, and this command has "
     "data=recall: add data=copy, or data=[recall,copy] to keep data=recall beside it\n"),
    (["-m", "data=recall,tasks", "data.tasks.copyy.length=8"], "did you mean data.tasks.copy? data.tasks.copy.length "
     "is a setting of data=copy or data=tasks, and this sweep has a job with data=recall, whose data "),
    (["data=tasks", "data.tasks.recal.pairs=4"], "error: data.tasks.recal is not a setting of data.tasks; did you "
     "mean data.tasks.recall?\n"),
    (["data=recall", "data.tasks.recall.pairz=4"], "error: data.tasks.recall.pairz is not a setting of "
     "data.tasks.recall; did you mean data.tasks.recall.pairs?\n"),
    (["data=recal"], "error: data=recal is not an option of data: choose one of calculator, copy, distance, length, "
     "recall, shakespeare, tasks, text; did you mean data=recall?\n"),
    # a near key of another option beats a farther one of the command's own: it said "did you mean model.heads?"
    (["model.kv_head=2"], "error: model.kv_head is not a setting of model=small; did you mean model.kv_heads? "
     "model.kv_heads is a setting of attention=gqa, and this command has attention=mha: add attention=gqa\n"),
    (["-m", "attention=mha,gqa", "model.kv_head=2"], "did you mean model.kv_heads? model.kv_heads is a setting of "
     "attention=gqa, and this sweep has a job with attention=mha: write ++model.kv_heads=2 to give it to every job"),
    (["data=recall", "data.tasks.zzzz.length=8"], "error: data.tasks.zzzz is not a setting of data.tasks; its "
     "settings: recall\n"),  # nothing near: what there is
    # the task's own check, where + adds the typo'd task past Hydra's
    (["data=recall", "+data.tasks.copyy.length=8"], "error: data.tasks.copyy is not a task; choose from calculator, "
     "recall, copy, distance, length; did you mean data.tasks.copy?\n"),
    (["data=recall", "+data.tasks.recall.pairz=4"], "error: data.tasks.recall.pairz is not a knob of recall; its "
     "knobs: keys, pairs, queries, values; did you mean data.tasks.recall.pairs?\n"),
    # length runs alone, which train.py refuses in a mixture
    (["data=tasks", "data.tasks.length.trained=4"], "data.tasks.length.trained is a setting of data=length, and this "
     "command has data=tasks: add data=length\n"),
    (["-m", "data=recall,copy", "data.tasks.copy.length=8"], "data.tasks.copy.length is a setting of data=copy or "
     "data=tasks, and this sweep has a job with data=recall, whose data (gpt.data.tasks.datamodule.TaskData) has no "
     "such setting: run data=copy in a sweep of its own"),
    # settings no part of the model reads: the run trained as without them, and its record said it had them
    (["pos=alibi", "model.rope_base=500"], "model.rope_base=500 changes nothing in a model of attention=mha, "
     "pos=alibi: none of its parts reads model.rope_base; drop it (in a sweep whose other jobs read it, give it to "
     "all as ++model.rope_base=500)"),
    (["attention=linear", "model.kernel=math"], "model.kernel=math changes nothing in a model of attention=linear"),
    (["attention=single_head", "model.heads=8"], "model.heads=8 changes nothing in a model of attention=single_head"),
    # schedule settings the schedule never reads: cosine has no stable phase to end, constant never decays
    (["optim.decay_fraction=0.5"], "optim.decay_fraction=0.5 is read by optim.schedule=wsd only, and this run has "
     "optim.schedule=cosine: drop optim.decay_fraction (in a sweep whose other jobs read it, give it to all as "
     "++optim.decay_fraction=0.5)"),
    (["optim.schedule=constant", "optim.min_lr=1e-4"], "optim.min_lr=0.0001 is read by optim.schedule=cosine or wsd "
     "only, and this run has optim.schedule=constant: drop optim.min_lr"),
    # a task's sample is its one line whatever the length: the run printed the same samples as without it
    (["callbacks.sample.max_new_tokens=20"], "callbacks.sample.max_new_tokens=20 is the length of a running text's "
     "sample; a task's is one whole line: drop callbacks.sample.max_new_tokens"),
    (["attenton=mha"], "attenton is not a setting; did you mean attention=mha?"),  # a typo'd group
    (["-m", "attenton=mha,gqa"], "attenton is not a setting; did you mean attention=mha?"),
    (["+trainer.nope=1"], "trainer.nope is not a setting of trainer"),
    (["trainer.detect_anomaly=true"], "trainer.detect_anomaly is a Lightning Trainer argument that configs/trainer/ "
                                      "does not list: add it with +trainer.detect_anomaly=true"),
    (["attention=mhq"], "attention=mhq is not an option of attention: choose one of gqa, "),
    # a preset was an optional group: a mistyped one was left out and the default calculator run trained
    (["experiment=attention_taks"], "experiment=attention_taks is not an option of experiment: choose one of "),
    (["model.heads=[1"], "cannot read the override 'model.heads=[1'"),
    (["-m", "model.head=2,4"], "did you mean model.heads?"),  # a sweep's keys are checked before its first job
    (["-m", "attention=mha,gqx"], "attention=gqx is not an option of attention: choose one of gqa, "),  # and options
    (["trainer.max_steps=0"], "error: trainer.max_steps=0 must be a positive integer"),  # it said max_steps=0
    # a key only one swept option has: Hydra composes every job first and refused the sweep in seven lines (a later
    # job), or named a fix that drops the sweep (the first job)
    (["-m", "attention=sliding_window,mha", "model.window=4"], "model.window is a setting of attention=sliding_window, "
     "and this sweep has a job with attention=mha: write ++model.window=4 to give it to every job"),
    (["-m", "attention=mha,sliding_window", "model.window=4"], "write ++model.window=4 to give it to every job"),
    # a preset's own sweep (experiment=attention_tasks sweeps attention=): told to add attention=sliding_window, which
    # replaced the preset's 11 variants by that one
    (["experiment=attention_tasks", "model.window=4"], "model.window is a setting of attention=sliding_window, and "
     "this sweep has a job with attention=mha: write ++model.window=4 to give it to every job"),
    (["experiment=attention_tasks", "attention=mha", "model.window=4"], "this command has attention=mha: add "
     "attention=sliding_window"),
    # told to write ++data.path=x.txt, which the calculator's data module, a class without it, then refused
    (["-m", "data=calculator,text", "data.path=x.txt"], "data.path is a setting of data=text or data=shakespeare, and "
     "this sweep has a job with data=calculator, whose data (gpt.data.tasks.datamodule.TaskData) has no such "
     "setting: run data=text in a sweep of its own"),
    # the fix named the first job's value alone: written as told, the sweep over model.window lost its 8
    (["-m", "attention=mha,sliding_window", "model.window=4,8"], "write ++model.window=4,8 to give it to every job"),
    # Lightning refused it once the run folder was made, in a line naming no key
    (["trainer.max_time=abc"], "trainer.max_time=abc must be DD:HH:MM:SS (00:01:30:00 is 90 minutes) or a mapping"),
    (["trainer.max_time={minute:90}"], "trainer.max_time={minute:90} must be DD:HH:MM:SS"),
    # values as the command line wrote them, not as Python prints them: True, None, (4, 0), {'minute': 90}, '64'
    (["model.dim=true"], "error: model.dim=true must be a positive integer"),
    (["model.heads=null"], "error: model.heads=null must be a positive integer"),
    (["model.dim='64'"], 'error: model.dim="64" must be a positive integer'),
    (["optim.betas=[0.9,null]"], "error: optim.betas=[0.9,null] must be a list of 2, each a number in [0, 1)"),
    (["data=recall", "data.tasks.recall.pairs=[4,0]"], "error: data.tasks.recall.pairs=[4,0] must be a positive "
     "integer or a list, each a positive integer"),
    (["data.tasks.calculator.operations=[plus,true]"], "error: data.tasks.calculator.operations=[plus,true] must be "
     "a list, each a string or null"),
    (["data.tasks.calculator=true"], "error: data.tasks.calculator=true must be a mapping of its knobs"),
    (["callbacks.sample=null"], "error: callbacks.sample must hold settings, not null: "),
    # Lightning took them, then divided by them at the first step: ZeroDivisionError, a run folder left behind
    (["trainer.val_check_interval=0"], "trainer.val_check_interval=0: it counts the batches between validations, at "
     "least 1; every run validates at its last step, so to validate only there set it to trainer.max_steps"),
    (["trainer.accumulate_grad_batches=0"], "error: trainer.accumulate_grad_batches=0 must be a positive integer"),
    # Lightning's TypeError traceback after the run folder was made (-1 means every GPU on a GPU)
    (["trainer.devices=-1"], "error: trainer.devices=-1 must be one of auto or a positive integer"),
    # bf16-mixed clipped by a factor of -1/norm: the gradients flipped, val loss 9.36 after 20 steps against 1.82
    (["trainer.gradient_clip_val=-1"], "error: trainer.gradient_clip_val=-1 must be a number >= 0 or null"),
    # Hydra's own option (basic, in docs/sweeps.md) was missing from the list, so no "did you mean" either
    (["-m", "hydra/launcher=basik"], "choose one of basic, cores, joblib, slurm, submitit_local, submitit_slurm; "
                                     "did you mean hydra/launcher=basic?"),
    # Hydra's three lines ("Sweeping over Hydra's configuration is not supported"), for the key a preset's file shows
    # a flag Hydra does not know, a bad value of one of its own, an override it would not read: its seven-line usage
    (["--lr", "0.1"], "error: --lr is not a flag of train.py, which takes overrides key=value and Hydra's flags "
                      "(python train.py --help lists both)\n"),
    (["--mutlirun", "attention=mha,gqa"], "; did you mean --multirun?\n"),
    (["-x"], "error: -x is not a flag of train.py"),
    (["--temperature=0.8"], "error: --temperature is a flag of generate.py, not of train.py"),
    (["--model.heads=4"], "error: --model.heads=4 is not a flag of train.py: write the override without dashes, "
                          "model.heads=4\n"),
    (["model.heads=2", "--cfg", "job", "trainer.max_steps=3"], "error: trainer.max_steps=3 comes after a flag, where "
     "Hydra reads no override: put every key=value before the flags (python train.py model.heads=2 "
     "trainer.max_steps=3 --cfg job)\n"),
    (["--cfg", "jobs"], "error: argument --cfg/-c: invalid choice: 'jobs' (choose from 'job', 'hydra', 'all')"),
    (["--config-dir"], "error: argument --config-dir/-cd: expected one argument"),
    (["experiment=attention_tasks", "hydra.sweeper.params.attention=mha,gqa"],
     "error: hydra.sweeper.params.attention=mha,gqa sweeps a setting of Hydra's own: sweep attention=mha,gqa itself "
     "(it replaces a preset's values of attention)"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[" ".join(argv) for argv, _ in BAD])
def test_bad_values_and_keys_are_one_line_naming_only_that_field(argv: list[str], message: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture) -> None:
    """train.py runs this check before Hydra makes a run folder (the CLI cases below prove the wiring)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        preflight(argv, CONFIGS, check_config)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert "resume" not in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--hydra-help"], ["--cfg", "job"],
                                  ["model.heads=2", "-c", "all", "--resolve"], ["-c", "job", "-p", "model"],
                                  ["--info"], ["-i", "defaults"], ["--config-dir", "configs", "--cfg", "job"],
                                  ["-cn", "train", "-cp", "configs", "--cfg", "job"], ["--multi", "attention=mha"]])
def test_hydras_own_flags_are_left_to_hydra(argv: list[str]) -> None:
    """What they print is Hydra's; the check of unknown flags must not refuse one of them (or its abbreviation)."""
    assert preflight(argv, CONFIGS, check_config) == argv


@pytest.mark.parametrize("argv", [["trainer=debug", "-m", "attention=mha,gqa"], ["trainer=debug", "attention=mha,gqa",
                                                                                 "--multirun"]])
def test_a_sweep_flag_anywhere_reaches_hydra_before_the_overrides(argv: list[str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra's parser reads one run of overrides: after a -m between them, attention=mha,gqa was an "unrecognized
    argument" in its seven-line usage, though the checks before it had passed the command line."""
    monkeypatch.chdir(tmp_path)
    handed = preflight(argv, CONFIGS, check_config)
    assert get_args_parser().parse_args(handed).overrides == ["trainer=debug", "attention=mha,gqa"]
    assert handed[0] in ("-m", "--multirun")


def test_hydras_version_flag_prints_hydras_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        preflight(["--version"], CONFIGS, check_config)
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("Hydra 1.")


def test_an_override_hydra_cannot_read_without_a_word_is_still_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its message's first line was taken as str(err).splitlines()[0]: an IndexError, not the line, when Hydra's
    error said nothing."""
    def unreadable(self: OverridesParser, overrides: list[str]) -> None:
        raise OverrideParseException(overrides[0], "")

    monkeypatch.setattr(OverridesParser, "parse_overrides", unreadable)
    with pytest.raises(ValueError, match=r"^cannot read the override 'model.heads=2' \(OverrideParseException\)"):
        parsed(["model.heads=2"])


def test_an_unknown_top_level_key_lists_the_groups_beside_the_settings(capsys: pytest.CaptureFixture) -> None:
    """attention and pos write into model, so the composed config alone never showed them."""
    with pytest.raises(SystemExit):
        preflight(["zzz=1"], CONFIGS, check_config)
    assert capsys.readouterr().err == "error: zzz is not a setting; its settings: model, data, trainer, logger, " \
        "callbacks, optim, seed, compile, resume, ckpt_path, init_from, and the groups attention, experiment, pos " \
        "(group=option)\n"


def test_a_sweep_leaves_its_values_to_each_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A configuration that cannot build is a failed row of the sweep report, so the other jobs still run."""
    monkeypatch.chdir(tmp_path)
    argv = ["-m", "model.heads=3,4", "model.dim=32"]
    assert preflight(argv, CONFIGS, check_config, claim=True) == argv and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, checked", [
    (["-m", "attention=mha,gqa", "seed=0,1"], [["attention=mha", "seed=0"]]),
    (["-m", "model.heads=3,4", "model.dim=32"], [["model.heads=3", "model.dim=32"], ["model.heads=4", "model.dim=32"]]),
], ids=["good", "first job refused"])
def test_a_sweep_is_checked_job_by_job_until_one_passes(argv: list[str], checked: list[list[str]],
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A sweep that can run pays for one job's composition and check before it starts, not for each job's; each
    job is checked as it checks itself, with its own overrides."""
    monkeypatch.chdir(tmp_path)
    jobs = []

    def check(cfg: DictConfig, sweep: Sequence[str] = ()) -> None:
        jobs.append(as_typed(cfg.hydra.overrides.task))
        check_config(cfg, sweep=sweep)

    assert preflight(argv, CONFIGS, check, claim=True) == argv and list(tmp_path.iterdir()) == []
    assert jobs == checked


@pytest.mark.parametrize("argv, message", [
    (["-m", "attention=mha,gqa", "data.seed=x"], "data.seed=x must be an integer; every job of the sweep has it, so "
     "none was started"),
    # each job checked as it checks itself: the advice repeats the sweep's values, not the first job's one
    (["-m", "pos=alibi", "model.rope_base=100,10000"], "model.rope_base=100 changes nothing in a model of "
     "attention=mha, pos=alibi: none of its parts reads model.rope_base; drop it (in a sweep whose other jobs read "
     "it, give it to all as ++model.rope_base=100,10000); every job of the sweep is refused (this is the first one's "
     "reason), so none was started"),
], ids=["one reason", "a reason each"])
def test_a_sweep_every_job_of_which_is_refused_is_refused_before_it_starts(
        argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    """Each job was refused in its own process, after the sweep's folder was made: a report of refused rows and exit
    status 1 for a command no job of which could run."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        preflight(argv, CONFIGS, check_config, claim=True)
    assert exit_.value.code == 2 and capsys.readouterr().err == f"error: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_with_one_bad_value_runs_the_other_jobs_and_reports_the_refused_one(refusing_sweep: Path) -> None:
    """Only a sweep whose every job is refused is refused before it starts: here the first job is (model.heads=3 at
    dim 32), and the next trains. The sweep ended with exit status 0 (the fixture checks it)."""
    sweep = refusing_sweep
    assert "error: heads=3 does not divide dim=32" in (sweep.parent / "stderr.txt").read_text()
    assert "| refused: heads=3 does not divide dim=32" in (sweep / "report.md").read_text()
    assert (sweep / "1" / "model.pt").is_file() and not (sweep / "0" / "model.pt").exists()


def test_the_fix_a_sweep_over_an_option_with_its_own_key_is_told_works(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["-m", "attention=mha,sliding_window", "++model.window=4"]
    assert preflight(argv, CONFIGS, check_config, claim=True) == argv


@pytest.mark.parametrize("kind", ["run", "sweep"])
def test_a_folder_holding_finished_results_is_not_started_afresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture, kind: str) -> None:
    """Hydra wrote the new config over the one the results were made with: a sweep run again into its folder
    reported the earlier numbers as the new overrides' (model.heads=3 at dim 32, which cannot build, as finished)."""
    folder = tmp_path / "results"
    job = folder / "0" if kind == "sweep" else folder
    job.mkdir(parents=True)
    (job / "summary.json").write_text('{"status": "ok"}')
    before = files_in(tmp_path)
    argv = [f"hydra.{kind}.dir={folder}", *(["-m", "model.heads=3,4"] if kind == "sweep" else ["model.heads=4"])]
    with pytest.raises(SystemExit):
        preflight(argv, CONFIGS, check_config, claim=True)
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder} holds a ") and f"pass another hydra.{kind}.dir=" in err
    assert files_in(tmp_path) == before
    if kind == "sweep":  # what the message offers
        assert "add resume=true to run only the jobs left" in err
    (job / "summary.json").write_text('{"status": "failed", "reason": "boom"}')  # nothing finished to lose
    assert preflight(argv, CONFIGS, check_config, claim=True)


@pytest.mark.parametrize("argv, key", [
    (["hydra.run.dir=runs/a\\${b}"], "hydra.run.dir=runs/a\\${b}"),
    (["-m", "seed=1,2", "hydra.sweep.dir=runs/s\\${b}"], "hydra.sweep.dir=runs/s\\${b}"),
    (["-m", "seed=1,2", "hydra.sweep.dir=runs/s", "hydra.sweep.subdir=j\\${b}_${hydra.job.num}"],
     "hydra.sweep.subdir=j\\${b}_${hydra.job.num}"),
], ids=["run.dir", "sweep.dir", "sweep.subdir"])
def test_a_folder_whose_name_holds_an_escaped_interpolation_is_refused_before_it_is_made(
        argv: list[str], key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    """Hydra resolves its job log's name, in the run folder, a second time: the escaped ${ passed every check, the
    folder was made, and the run ended in a traceback from Hydra's job-logging setup."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        preflight(argv, CONFIGS, check_config, claim=True)
    assert exit_.value.code == 2 and capsys.readouterr().err == f"error: {key}: Hydra cannot use a folder whose " \
        f"name holds ${{ (its job logging reads it as an interpolation); pick another {key.split('=')[0]}= without " \
        "one\n"
    assert list(tmp_path.iterdir()) == []


# One of each way train.py refuses, run as real processes too: before Hydra starts, a sweep before its folder is made,
# and in the job, after Hydra made the run folder and wrote its record there
WIRED = [
    # refused before Hydra makes a folder; the whole line, the one the in-process cases of tests/test_fuzz_train.py meet
    (["model.block_size=1,2"], "error: model.block_size=1,2 is a sweep: add -m to run one job per value (python "
     "train.py -m model.block_size=1,2), or give one value (quote one that holds a comma: key='a,b')\n"),
    # every job was refused in its own process, after the sweep's folder was made: exit 1 and a report of refusals
    (["-m", "attention=mha,gqa", "trainer=debug", "data.seed=x"], "error: data.seed=x must be an integer; every job "
                                                                   "of the sweep has it, so none was started"),
    (["data=text", "data.path=nope.txt"], "error: data.path="),  # refused after Hydra makes the run folder
    # Hydra printed its seven-line usage, then "unrecognized arguments: --prompt"
    (["--prompt", "foo"], "error: --prompt is a flag of generate.py, not of train.py: python generate.py --prompt "
                          "... runs a trained model; train.py takes overrides key=value (python train.py --help lists "
                          "them)\n"),
]


@pytest.mark.parametrize("argv, message", [
    *WIRED,
    (["model.bias=no"], "error: model.bias=no must be true or false"),
    (["data.tasks.calculator.operations=[plus,modulo]"],
     "error: data.tasks.calculator.operations has unknown ['modulo']"),  # a task's knobs, by the task itself
    (["-m", "attention=mha,gqx"], "error: attention=gqx is not an option of attention"),  # no multirun/ folder
    (["data=recall", "data.tasks.copy.length=8"], "error: data.tasks.copy.length is a setting of data=copy or "
                                                   "data=tasks"),  # it said "data.tasks.copy is not a setting"
    (["data=recall", "data.tasks.copyy.length=8"], "error: data.tasks.copyy is not a setting of data.tasks; did "
                                                    "you mean data.tasks.copy? "),  # it listed recall alone
    # where the job runs, not where it is composed (a cluster's login node has no GPU); Lightning's words were bare
    *([(["trainer=gpu"], "error: trainer.accelerator=gpu needs a CUDA GPU and torch sees none here"),
       # told to drop trainer=gpu or trainer=fsdp, which this command never gave
       (["trainer.accelerator=cuda"], "error: trainer.accelerator=cuda needs a CUDA GPU and torch sees none here: to "
                                      "train on the CPU drop trainer.accelerator=cuda")]
      if not torch.cuda.is_available() else []),
    *([(["trainer.accelerator=tpu"], "error: trainer.accelerator=tpu needs torch_xla, which this Python lacks")]
      if importlib.util.find_spec("torch_xla") is None else []),  # was a traceback, and the run folder stayed
    # trainer=ddp's accelerator=auto trains on the CPU where torch sees no GPU: Lightning's TypeError traceback
    *([(["trainer=ddp", "trainer.devices=-1"], "error: trainer.devices=-1 must be one of auto or a positive integer"),
       # Lightning trained it in bf16-mixed with a warning, while the run's first line and record said 16-mixed
       (["trainer=ddp", "trainer.precision=16-mixed"], "error: trainer.precision=16-mixed needs a GPU: on CPU use "
                                                        "trainer.precision=bf16-mixed or 32")]
      if not torch.cuda.is_available() and not torch.backends.mps.is_available() else []),
])
def test_train_refuses_in_one_line_and_leaves_no_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            argv: list[str], message: str) -> None:
    """In this process, through the code `python train.py <argv>` runs (the real processes below prove the wiring):
    its preflight, which makes and locks a single run's folder, then for a command line that passes it the job
    Hydra's main runs in that folder."""
    monkeypatch.chdir(tmp_path)
    handed: list[str] = []
    outcome = call(None, lambda: handed.extend(preflight(argv, CONFIGS, train.check_command, claim=True)))
    if outcome.code == 0:
        run_dir = Path(compose_train(CONFIGS, handed).hydra.run.dir)
        try:
            outcome = job(handed, run_dir, entry=None)
        finally:
            release(run_dir)  # train.py's lock on its folder ends with its process
    assert outcome.code == 2 and outcome.err.startswith(message) and outcome.err.count("\n") == 1, outcome.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", WIRED)
def test_train_cli_refuses_in_one_line_and_leaves_no_run_folder(tmp_path: Path, argv: list[str],
                                                                message: str) -> None:
    result = run_cli("train.py", *argv, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith(message) and result.stderr.count("\n") == 1, \
        result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command, code, said", [
    (["train.py", "model.bias=no"], 2, "error: model.bias=no must be true or false"),
    (["train.py", "data.tasks.calculator.operations=[plus,modulo]"], 2,
     "error: data.tasks.calculator.operations has unknown ['modulo']; choose from ['plus', 'minus', 'times', "
     "'divided by']"),
    (["gpt", "which-split", "one plus one equals"], 0, None),
    # the list of options offered is checked as a run's config is, but for the sections it leaves as they were
    (["train.py", "data=recall", "data.tasks.copyy.length=8"], 2,
     "error: data.tasks.copyy is not a setting of data.tasks; did you mean data.tasks.copy? data.tasks.copy.length is "
     "a setting of data=copy or data=tasks, and this command has data=recall: add data=copy, or data=[recall,copy] to "
     "keep data=recall beside it"),
])
def test_what_needs_no_lightning_does_not_wait_for_its_import(tmp_path: Path, command: list[str], code: int,
                                                              said: str | None) -> None:
    """The model's, the optimizer's, the tasks' and the run's own settings are checked before the sections Lightning
    builds from, and which-split reads tasks without the data module: importing Lightning for them made a typo in
    model.bias, a question to which-split, or a typo'd task knob whose advice offers a list of options, a
    five-to-six-second wait for one line."""
    script = ["-m", command[0]] if command[0] == "gpt" else [str(ROOT / command[0])]
    result = subprocess.run([sys.executable, "-X", "importtime", *script, *command[1:]], cwd=tmp_path,
                            env=child_env(), capture_output=True, text=True, timeout=300)
    imports = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    told = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert result.returncode == code and told == ([said] if said else []), told
    imported = {line.rsplit("|", 1)[-1].strip() for line in imports}
    assert imported and not {name for name in imported if name.split(".")[0] == "lightning"}


def test_generate_says_which_model_and_prints_what_the_text_api_returns(
        trained: Path, capsys: pytest.CaptureFixture) -> None:
    prompt = "ninety nine plus ninety nine equals"
    answer = load(trained).complete(prompt)
    assert generate.main(["--ckpt", str(trained), "--prompt", prompt]) == 0  # a run folder: its model.pt
    out, err = capsys.readouterr()
    assert out == f"{prompt} {answer}\n".replace(" \n", "\n")
    assert err == f"model: {trained / 'model.pt'} (trained on calculator)\n"
    args = ["--ckpt", str(trained), "--prompt", "two", "--temperature", "1", "--num-samples", "3", "--seed", "4"]
    assert generate.main(args) == 0
    samples = capsys.readouterr().out.split(f"{generate.SEPARATOR}\n")
    text_model, generator = load(trained), torch.Generator().manual_seed(4)
    assert samples == [f"two{''.join(text_model.stream('two', temperature=1.0, generator=generator))}\n"
                       for _ in range(3)]


def test_generate_device_the_torch_lacks_is_one_line(trained: Path, capsys: pytest.CaptureFixture) -> None:
    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    assert generate.main(["--ckpt", str(trained), "--device", "cuda"]) == 2
    assert capsys.readouterr().err == f"error: device 'cuda': this torch ({torch.__version__}) has no CUDA device " \
                                      "it can use; use cpu\n"


def test_evaluate_refuses_a_corpus_it_cannot_grade_and_a_seed_that_would_overlap_training(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    chars = CharTokenizer(list("\nabc "))
    save_model(tmp_path / "model.pt", build(ModelConfig(vocab_size=5, layers=1, heads=2, dim=32, block_size=8)),
               chars, {"corpus": "poems", "one_example_per_line": True, "seed": 0})
    assert cli(["evaluate", "--ckpt", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'model.pt'} was trained on poems, which has "
                                              "no right answers to grade")
    assert cli(["evaluate", "--ckpt", str(trained), "--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --seed 3 is not the data.seed=0 this model was trained with") and err.count("\n") == 1


def test_a_debugging_switch_does_not_travel_into_model_pt(tmp_path: Path) -> None:
    tokenizer = WordTokenizer(["\n", "a"])
    traced = build(ModelConfig(vocab_size=2, layers=1, heads=2, dim=32, block_size=8, trace_shapes=True))
    save_model(tmp_path / "model.pt", traced, tokenizer)
    model, _ = load_checkpoint(tmp_path / "model.pt")
    assert model.cfg.trace_shapes is False
    assert torch.load(tmp_path / "model.pt", weights_only=True)["model_config"]["trace_shapes"] is False


@pytest.mark.parametrize("tokenizer, text, message", [
    (WordTokenizer(["\n", "two", "plus"]), "Two plus zebra Two",
     "word(s) 'Two', 'zebra' not in the vocabulary of this model; the vocabulary has 'two': try lowercase"),
    (CharTokenizer(list("ab ")), "Ab xy", "character(s) 'A', 'x', 'y' not in the vocabulary of this model; "
                                          "the vocabulary has 'a': try lowercase"),
])
def test_unknown_pieces_are_listed_together_with_a_lowercase_hint(tokenizer: WordTokenizer | CharTokenizer,
                                                                   text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        tokenizer.encode(text)
    assert str(err.value) == message


def test_resume_of_a_finished_run_says_it_is_finished(trained: Path) -> None:
    ckpt = trained / "checkpoints/last.ckpt"
    cfg = compose_with("trainer.max_steps=30", f"ckpt_path={ckpt}")
    with pytest.raises(ValueError, match=rf"^{ckpt} has finished: it is at step 30 of trainer.max_steps=30"):
        resume_from(cfg, trained)


def test_a_small_vocabulary_is_listed_when_no_lowercase_form_helps() -> None:
    """Digits to the calculator: without its words the line named nothing to write instead."""
    with pytest.raises(ValueError) as err:
        WordTokenizer(["\n", "two", "plus"]).encode("2+2")
    assert str(err.value) == "word(s) '2', '+' not in the vocabulary of this model; use its own: '\\n', 'two', 'plus'"


def test_a_max_time_mapping_reaches_the_trainer_as_lightning_takes_it() -> None:
    """Lightning reads a dict as timedelta(**it); the config's mapping got there as a DictConfig, which it read as a
    timedelta: a traceback, after the run folder was made."""
    cfg = compose_with("trainer.max_time={minutes:90}")
    check_config(cfg)
    trainer = L.Trainer(**trainer_arguments(cfg), logger=False, enable_checkpointing=False)
    timer, = [c for c in trainer.callbacks if isinstance(c, Timer)]
    assert timer.time_remaining() == 90 * 60
