"""bench/sweep_startup.py refuses what it cannot measure in one line, before any sweep runs."""
from __future__ import annotations

import sys

import pytest

from gpt.training.checks import check_config
from gpt.training.composition import compose_train
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import sweep_startup  # noqa: E402


@pytest.mark.parametrize("argv", [["--jobs", "1"], ["--repeats", "0"]])
def test_nothing_to_measure_is_refused(argv: list[str]) -> None:
    """--jobs 1 ran every sweep and then ended in ZeroDivisionError (a job after the first is what it measures);
    --repeats 0 in 'StatisticsError: no median for empty data'."""
    with pytest.raises(SystemExit):
        sweep_startup.parse_args(argv)


def test_its_one_step_jobs_pass_train_pys_checks() -> None:
    """Every sweep it timed was refused: ONE_STEP set callbacks.sample.max_new_tokens, which train.py refuses on
    the default calculator corpus (a task's sample is one whole line), so `python bench/sweep_startup.py` printed
    'all 1 jobs were refused' and measured nothing."""
    cfg = compose_train(ROOT / "configs", sweep_startup.ONE_STEP)
    check_config(cfg, sweep_startup.ONE_STEP)


def test_an_unknown_launcher_is_refused_before_anything_is_timed(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """--launchers basic bsaic timed train.py --help and every basic sweep, minutes, before the first bsaic sweep
    failed."""
    monkeypatch.setattr(sweep_startup, "seconds", lambda command, cwd: pytest.fail(f"timed {command}"))
    with pytest.raises(SystemExit):
        sweep_startup.main(["--launchers", "basic", "bsaic"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # the options after 'slurm' are the installed plugins'
    assert ": error: --launchers bsaic is not a hydra/launcher option: choose from basic, cores, joblib, slurm" in last
    assert last.endswith("; did you mean basic?")


def test_the_launchers_hydra_offers_are_taken() -> None:
    launchers = ["basic", "cores", "joblib", "slurm"]
    assert sweep_startup.parse_args(["--launchers", *launchers]).launchers == launchers
