"""Loggers: csv (in test_train), tensorboard and wandb log the metrics and the sample text; wandb's mode
is decided before it starts (offline without an API key), lands in the run folder, and each multirun
job is its own wandb run."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpt.data.tokenizers.vocab import CharTokenizer
from gpt.training import callbacks
from gpt.training.loggers import make_logger, wandb_mode
from tests.conftest import ROOT, child_env, run_cli
from tests.test_configs import compose_with

TINY = ["trainer=debug", "model.layers=1", "model.dim=32", "model.heads=2", "data.batch_size=32",
        "data.eval_lines=10"]
METRICS = {"train/loss", "train/lr", "train/tok_per_s", "val/loss", "val/ppl", "val/acc_all"}


@pytest.fixture
def no_wandb_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_wandb_mode_is_online_only_with_an_api_key(no_wandb_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert wandb_mode() == "offline"
    netrc = no_wandb_env / ".netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password 0123456789abcdef\n")
    netrc.chmod(0o600)
    assert wandb_mode() == "online"  # what `wandb login` leaves behind
    netrc.unlink()
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef")
    assert wandb_mode() == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode() == "disabled"  # the user's explicit choice wins


@pytest.mark.parametrize("logger, setting", [("tensorboard", "name"), ("wandb", "project")])
def test_a_logger_setting_with_an_escaped_interpolation_reaches_the_logger_as_written(
        tmp_path: Path, logger: str, setting: str) -> None:
    """logger.name='a\\${x}' passed every check, then stopped the run with "Interpolation key 'x' not found": Hydra's
    instantiate resolved the section a second time, reading the unescaped ${x} as an interpolation."""
    wandb = ["logger.name=run", "logger.mode=offline"] if logger == "wandb" else []  # its name is Hydra's job's
    cfg = compose_with(f"logger={logger}", f"logger.{setting}=a\\${{x}}", f"logger.save_dir={tmp_path}", *wandb)
    built = make_logger(cfg.logger)
    assert built.name == "a${x}" and built.save_dir == str(tmp_path)  # a wandb logger's name is its project's


def test_tensorboard_logs_metrics_and_sample_text(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = run_cli("train.py", *TINY, "logger=tensorboard", "hydra.run.dir=run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    events = EventAccumulator(str(tmp_path / "run/tensorboard/version_0")).Reload()
    assert METRICS <= set(events.Tags()["scalars"])
    samples = events.Tensors("val/sample/text_summary")
    assert [s.step for s in samples] == [10, 20] and all(s.tensor_proto.string_val[0] for s in samples)


def test_wandb_offline_multirun_gives_each_job_its_own_run_in_its_folder(no_wandb_env: Path) -> None:
    env = child_env(HYDRA_FULL_ERROR="0")  # no key, no WANDB_MODE
    result = subprocess.run([sys.executable, str(ROOT / "train.py"), "-m", *TINY, "logger=wandb", "seed=1,2",
                             "hydra.sweep.dir=sweep"], cwd=no_wandb_env, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    synced = re.findall(r"upload with: wandb sync (\S+)", result.stdout)
    runs = [sorted((no_wandb_env / f"sweep/{job}/wandb").glob("offline-run-*")) for job in (0, 1)]
    # jobs run side by side, so they may finish (and print their sync lines) in either order
    assert [len(r) for r in runs] == [1, 1] and sorted(synced) == sorted(str(r[0]) for r in runs)
    assert runs[0][0].name.split("-")[-1] != runs[1][0].name.split("-")[-1]  # two wandb run ids
    for (run,) in runs:
        records = next(run.glob("run-*.wandb")).read_bytes()  # offline: metrics are records in this file
        assert all(name.encode() in records for name in METRICS)
        tables = sorted((run / "files/media/table/val").glob("sample_*.table.json"))
        rows = [json.loads(t.read_text())["data"][0] for t in tables]  # [step, sampled text (may be an empty line)]
        assert sorted(step for step, _ in rows) == [10, 20] and all(isinstance(text, str) for _, text in rows)


def test_an_empty_sample_is_said_to_be_empty_and_how_it_was_drawn(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """Early in training on a one-example-per-line corpus the model may end its line at once (on running text, its
    document): the printed sample says so instead of ending at `sample:`. It names its temperature: a calculator line
    sampled at 0.8 read as a wrong answer from a model that answers every held-out problem greedily."""
    class EndsAtOnce:
        line_based = True

        def __init__(self, *args: object) -> None:
            pass

        def complete(self, *args: object, **kwargs: object) -> str:
            return ""

    monkeypatch.setattr(callbacks, "TextModel", EndsAtOnce)
    sample = callbacks.SampleText(CharTokenizer.fit("ab\n"), {})
    trainer = SimpleNamespace(sanity_checking=False, is_global_zero=True, global_step=30, loggers=[])
    sample.on_validation_epoch_end(trainer, SimpleNamespace(model=None, print=print))
    assert capsys.readouterr().out == \
        "step 30 sample at temperature 0.8: (an empty line: the model ends the line at once)\n"
    EndsAtOnce.line_based = False  # running text stops at the end-of-text token
    sample.on_validation_epoch_end(trainer, SimpleNamespace(model=None, print=print))
    assert capsys.readouterr().out == \
        "step 30 sample at temperature 0.8: (nothing: the model ends the document at once)\n"
    sample.temperature = 0  # argmax: nothing drawn at random
    sample.on_validation_epoch_end(trainer, SimpleNamespace(model=None, print=print))
    assert capsys.readouterr().out == "step 30 greedy sample: (nothing: the model ends the document at once)\n"


def test_a_sample_prompt_that_ends_its_line_stops_the_run_before_training() -> None:
    """The text API refuses a line-based prompt that ends its line: the callback's own check let one through, and
    the run would have ended at its first validation instead."""
    with pytest.raises(ValueError, match=r"callbacks.sample.prompt='ab\\n': the prompt 'ab\\n' ends its line"):
        callbacks.SampleText(CharTokenizer.fit("ab\n"), {"one_example_per_line": True}, prompt="ab\n")
    callbacks.SampleText(CharTokenizer.fit("ab\n"), {}, prompt="ab\n")  # running text goes on after a line break
    # Nor did it try running text's empty prompt in a vocabulary with no line break and no end-of-text token
    with pytest.raises(ValueError, match=r"^callbacks.sample.prompt='': this model's vocabulary has no line break or "
                                         r"end-of-text token to start from: pass a prompt$"):
        callbacks.SampleText(CharTokenizer.fit("ab"), {})
