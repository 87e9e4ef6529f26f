"""The CLIs end to end as a user runs them: train.py with trainer=debug writes model.pt, last.ckpt,
metrics and samples; generate.py and gpt.evaluate use that model.pt; user mistakes are one line each."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

import generate
from gpt import load_checkpoint
from gpt.calculator import split_problems
from gpt.generation import generate as generate_ids
from gpt.resume import load_resume_checkpoint
from tests.conftest import ROOT, run_cli
from train import check_config

TINY = ["trainer=debug", "model.layers=1", "model.dim=32", "model.heads=2", "data.batch_size=32",
        "data.eval_problems=10"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder under <tmp>/outputs, trained once for every test here."""
    cwd = tmp_path_factory.mktemp("cli")
    result = run_cli("train.py", *TINY, "hydra.run.dir=outputs/run", cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd / "outputs/run"


def test_train_writes_model_checkpoint_metrics_and_samples(trained: Path) -> None:
    model, tokenizer = load_checkpoint(trained / "model.pt")
    assert model.cfg.layers == 1 and tokenizer.decode(tokenizer.encode("two plus three")) == "two plus three"
    assert load_resume_checkpoint(trained / "checkpoints/last.ckpt")["global_step"] == 20
    with open(trained / "csv/version_0/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    for column in ("train/loss", "train/lr", "train/tok_per_s", "val/loss", "val/ppl", "val/acc_all"):
        assert any(row.get(column) for row in rows), column
    val = [row for row in rows if row.get("val/loss")]
    assert [int(row["step"]) for row in val] == [9, 19]  # validation at steps 10 and 20 (0-based log step)
    for row in val:
        assert math.isclose(float(row["val/ppl"]), math.exp(float(row["val/loss"])), rel_tol=1e-5)
    samples = (trained / "csv/version_0/samples.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in samples] == ["val/sample step 10", "val/sample step 20"]


def test_generate_cli_prints_the_models_greedy_continuation(trained: Path) -> None:
    prompt = "two plus three equals"
    model, tokenizer = load_checkpoint(trained / "model.pt")
    newline = tokenizer.encode("\n")[0]
    ids = [newline, *tokenizer.encode(prompt)]
    out = generate_ids(model, torch.tensor([ids]), 6, temperature=0.0)[0].tolist()
    expected = prompt + tokenizer.decode(out)[len(tokenizer.decode(ids)):]
    args = ["--prompt", prompt, "--max-new-tokens", "6"]
    explicit = run_cli("generate.py", "--ckpt", str(trained / "model.pt"), *args, cwd=trained)
    newest = run_cli("generate.py", *args, cwd=trained.parents[1])  # finds outputs/run/model.pt
    assert explicit.returncode == newest.returncode == 0, explicit.stderr + newest.stderr
    assert explicit.stdout.strip() == newest.stdout.strip() == expected.strip()


def test_evaluate_cli_grades_the_test_split(trained: Path) -> None:
    result = run_cli("-m", "gpt.evaluate", "--ckpt", str(trained / "model.pt"), cwd=trained)
    assert result.returncode == 0, result.stderr
    assert f"{len(split_problems(0, 0.1, 0.1)['test'])} test examples, data.seed=0" in result.stdout
    accuracy = float(result.stdout.split("all:")[1].split("%")[0])
    assert 0.0 <= accuracy <= 100.0


@pytest.mark.parametrize("overrides, message", [
    (["model.heads=5", "model.dim=128"], "error: heads=5 does not divide dim=128"),
    (["model.layers=0"], "error: layers=0 must be a positive integer"),
    (["model.heads=four"], "error: heads='four' must be a positive integer"),
    (["attention=nope"], "Could not find 'attention/nope'"),
    (["model.nope=1"], "Key 'nope' is not in struct"),
])
def test_train_cli_user_errors_are_one_line_before_any_work(tmp_path: Path, overrides: list[str],
                                                            message: str) -> None:
    result = run_cli("train.py", *overrides, "hydra.run.dir=run", cwd=tmp_path)
    assert message in result.stderr and "Traceback" not in result.stderr and result.returncode != 0, result.stderr
    assert not (tmp_path / "run/checkpoints").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize("overrides, message", [
    (["+trainer.nope=1"], "trainer.nope is not a lightning.Trainer argument"),
    (["trainer.precision=16-mixed"], "trainer.precision=16-mixed needs a GPU"),
    (["resume=true", "ckpt_path=x.ckpt"], "pass either resume=true"),
    (["callbacks.checkpoint.every_n_steps=0"], "every_n_steps=0 must be a positive integer"),
    (["compile=yes"], "must be true or false"),
])
def test_impossible_settings_are_refused_by_check_config(overrides: list[str], message: str) -> None:
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    with pytest.raises(ValueError, match=message.replace("+", r"\+").replace("=", "=")):
        check_config(cfg)


@pytest.mark.parametrize("args, message", [
    (["--ckpt", "absent.pt"], "error: no checkpoint at absent.pt"),
    (["--ckpt", "notes.txt"], "is not a readable torch file"),
    (["--prompt", "two plus zebra"], "error: word(s) 'zebra' not in the vocabulary"),
    (["--top-p", "1.5"], "error: --top-p=1.5 must be in (0, 1]"),
    (["--max-new-tokens", "-1"], "error: --max-new-tokens=-1 must be 0 or more"),
])
def test_generate_user_errors_are_one_line(trained: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture, args: list[str], message: str) -> None:
    monkeypatch.chdir(trained)
    (trained / "notes.txt").write_text("not a checkpoint")
    argv = args if "--ckpt" in args else ["--ckpt", "model.pt", *args]
    assert generate.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_generate_without_any_checkpoint_says_to_train_first(tmp_path: Path) -> None:
    result = run_cli("generate.py", "--prompt", "two", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line, = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "run `python train.py` first" in line
