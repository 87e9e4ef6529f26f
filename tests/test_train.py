"""The CLIs end to end as a user runs them: train.py with trainer=debug writes model.pt, last.ckpt,
metrics and samples (the `trained` run of tests/conftest.py); generate.py and gpt.evaluation.evaluate use that model.pt;
user mistakes are one line each (train.py's command line: tests/test_first_hour.py)."""
from __future__ import annotations

import csv
import json
import math
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_dir

import generate
from gpt import ModelConfig, load_checkpoint
from gpt.data.tasks.calculator import split_problems
from gpt.inference.generation import generate as generate_ids
from gpt.training import checks, precision, section_values
from gpt.training.checks import check_config
from gpt.training.checkpoint_io import load_resume_checkpoint
from tests.conftest import ROOT, run_cli

def test_train_writes_model_checkpoint_metrics_and_samples(trained: Path) -> None:
    model, tokenizer = load_checkpoint(trained / "model.pt")
    assert model.cfg.layers == 1 and tokenizer.decode(tokenizer.encode("two plus three")) == "two plus three"
    assert load_resume_checkpoint(trained / "checkpoints/last.ckpt")["global_step"] == 30
    with open(trained / "csv/version_0/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    for column in ("train/loss", "train/lr", "train/tok_per_s", "val/loss", "val/ppl", "val/acc_all"):
        assert any(row.get(column) for row in rows), column
    val = [row for row in rows if row.get("val/loss")]
    assert [int(row["step"]) for row in val] == [19, 29]  # at step 20, and at the last step (0-based log step)
    for row in val:
        assert math.isclose(float(row["val/ppl"]), math.exp(float(row["val/loss"])), rel_tol=1e-5)
    samples = (trained / "csv/version_0/samples.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in samples] == ["val/sample step 20", "val/sample step 30"]


def test_metrics_are_logged_on_the_logger_steps_and_the_last() -> None:
    """Lightning writes a row at the last step whatever the interval: at 40 steps logging every 25 it wrote step
    24's loss again as step 39's."""
    from gpt.training.lit import logs_at

    assert [step for step in range(40) if logs_at(step, every=25, max_steps=40)] == [24, 39]
    assert [step for step in range(30) if logs_at(step, every=5, max_steps=30)] == [4, 9, 14, 19, 24, 29]
    assert not any(logs_at(step, every=0, max_steps=40) for step in range(40))  # logging off


def test_run_ends_validated_graded_and_summarised_in_one_line(trained: Path) -> None:
    summary = json.loads((trained / "summary.json").read_text())
    assert summary["steps"] == 30 and summary["val_loss"] is not None and "all" in summary["val_acc"]
    last = (trained.parents[1] / "stdout.txt").read_text().splitlines()
    line = next(line for line in last if line.startswith("done in "))
    assert f"step 30, val loss {summary['val_loss']:.4f}, held-out exact match " in line
    assert line.endswith(f"; model: {trained / 'model.pt'}")


def test_a_run_that_ends_within_its_warmup_says_so(trained: Path) -> None:
    # 30 steps of a 100-step warmup train at 1-30% of the LR asked for: unsaid, a short run looked like a bad LR.
    assert "note: trainer.max_steps=30 ends within optim.warmup_steps=100: the LR only warms up, to 30% of its " \
        "peak; lower optim.warmup_steps to train at it" in (trained.parents[1] / "stdout.txt").read_text()


def test_the_warmup_note_counts_the_steps_trained_not_the_schedules_end(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """optim.max_steps given apart from trainer.max_steps (as a continued run keeps its schedule): the note read it as
    the steps trained, silent where 10 steps of a 20-step warmup reach half the LR, and naming the wrong length."""
    from tests.test_data import train_in_process

    train_in_process(tmp_path / "run", "trainer=debug", "logger=none", "model.layers=1", "model.dim=32",
                     "model.heads=2", "data.batch_size=16", "data.eval_lines=10", "trainer.max_steps=10",
                     "optim.max_steps=40", "optim.warmup_steps=20")
    assert "note: trainer.max_steps=10 ends within optim.warmup_steps=20: the LR only warms up, to 50% of its peak" \
        in capsys.readouterr().out


def test_generate_cli_prints_the_models_greedy_continuation(trained: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    """generate.py itself with --ckpt; without it, in this process, from where it finds the newest model.pt."""
    prompt = "two plus three equals"
    model, tokenizer = load_checkpoint(trained / "model.pt")
    newline = tokenizer.encode("\n")[0]
    ids = [newline, *tokenizer.encode(prompt)]
    out = generate_ids(model, torch.tensor([ids]), 6, temperature=0.0)[0].tolist()
    expected = prompt + tokenizer.decode(out)[len(tokenizer.decode(ids)):]
    args = ["--prompt", prompt, "--max-new-tokens", "6"]
    explicit = run_cli("generate.py", "--ckpt", str(trained / "model.pt"), *args, cwd=trained)
    monkeypatch.chdir(trained.parents[1])
    assert generate.main(args) == 0  # finds outputs/run/model.pt
    newest = capsys.readouterr().out
    assert explicit.returncode == 0, explicit.stderr
    assert explicit.stdout.strip() == newest.strip() == expected.strip()


def test_evaluate_cli_grades_the_test_split(trained: Path) -> None:
    result = run_cli("-m", "gpt", "evaluate", "--ckpt", str(trained / "model.pt"), cwd=trained)
    assert result.returncode == 0, result.stderr
    problems = len(split_problems(0, 0.1, 0.1)['test'])  # one answer per calculator line
    assert f"{problems} answers of {problems} test lines, data.seed=0" in result.stdout
    all_row = next(line.split() for line in result.stdout.splitlines() if line.split()[:1] == ["all"])
    exact, token = (float(all_row[i].rstrip("%")) for i in (1, 3))  # exact match, per-token accuracy
    assert 0.0 <= exact <= token <= 100.0


@pytest.mark.parametrize("overrides, message", [
    (["+trainer.nope=1"], "trainer.nope is not a setting of trainer"),
    # a + adds any key: each of these trained as if it were not given (the seed at 1337, no sample callback)
    (["+seeds=3"], "seeds is not a setting of train.py; did you mean seed?"),
    (["+foo.bar=1"], "foo is not a setting of train.py .settings: seed, compile, resume, ckpt_path, init_from, and "
                     "the sections model, data, optim, trainer, callbacks, logger."),
    (["+callbacks.sampel.prompt=x"], "callbacks.sampel is not a setting of callbacks; did you mean callbacks.sample?"),
    (["trainer.precision=16-mixed"], "trainer.precision=16-mixed needs a GPU"),
    # Lightning's ModuleNotFoundError traceback for transformer_engine, a GPU library, after the run folder was made
    (["trainer.precision=transformer-engine"], "trainer.precision=transformer-engine needs a GPU"),
    (["resume=true", "ckpt_path=x.ckpt"], "pass either resume=true"),
    (["callbacks.checkpoint.every_n_steps=0"], "every_n_steps=0 must be a positive integer"),
    (["compile=yes"], "compile=yes must be true or false"),
    (["optim.schedule=nope"], "optim.schedule=nope is unknown; choose one of: constant, cosine, wsd"),
    (["optim.min_lr=1"], "optim.min_lr=1 must be between 0 and optim.lr=0.003"),
    # passed on to wandb.init, which refused it after the run folder was made, naming neither key nor modes
    (["trainer=fsdp"], "optim=muon orthogonalises whole matrices, which trainer=fsdp shards: use optim=adamw"),
    (["logger=wandb", "logger.mode=foo"], "logger.mode=foo must be one of online, offline, disabled or null"),
    # trained on 8-token windows in a 16-token model without a word
    (["data=text", "data.path=x.txt", "data.block_size=8"],
     "data.block_size=8 is not set on its own: it follows model.block_size=16; set model.block_size=8 instead"),
])
def test_impossible_settings_are_refused_by_check_config(overrides: list[str], message: str) -> None:
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        check_config(cfg)


def test_a_null_precision_trains_in_lightnings_fp32() -> None:
    """Lightning reads trainer.precision=null as 32-true; it was refused as "precision=None must be one of ... or
    null", naming as allowed the value it refused."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["trainer.precision=null"])
    check_config(cfg)
    assert section_values.trainer_arguments(cfg)["precision"] == "32-true"


def test_a_block_must_hold_the_corpus_longest_line_and_may_be_exactly_as_long() -> None:
    """check_fits, before training: a longest line whose inputs (max_tokens: every token but the last) are one token
    longer than the block is refused naming the block it needs; inputs exactly as long as the block fit."""
    model_cfg = ModelConfig(vocab_size=10, layers=1, heads=2, dim=8, block_size=12)
    checks.check_fits(model_cfg, SimpleNamespace(max_tokens=12))
    with pytest.raises(ValueError, match=r"^model.block_size=12 is shorter than the corpus's longest line \(13 "
                                         r"tokens\): set model.block_size=13 or more$"):
        checks.check_fits(model_cfg, SimpleNamespace(max_tokens=13))


@pytest.mark.parametrize("args, message", [
    (["--ckpt", "absent.pt"], "error: no checkpoint at absent.pt"),
    # a file of the run folder that is no checkpoint: the run folder named instead
    (["--ckpt", "notes.txt"], "notes.txt is a file of the run folder"),
    (["--prompt", "two plus zebra"], "error: word(s) 'zebra' not in the vocabulary"),
    (["--top-p", "1.5"], "error: --top-p=1.5 must be in (0, 1]"),
    (["--max-new-tokens", "-1"], "error: --max-new-tokens=-1 must be 0 or more"),
    # greedy by default on a line corpus: these printed the same answer, silently unsampled
    (["--top-k", "5"], "error: --top-k=5 narrows sampling, but --temperature=0 decodes greedily"),
    (["--temperature", "-0.5"], "error: --temperature=-0.5 must be a finite number >= 0"),
    # the hint, already a flag, came back with its dashes doubled: "pass ----temperature 0.8"
    (["--num-samples", "3"], "error: --num-samples=3 would print the same answer 3 times, since --temperature=0 "
     "decodes greedily (the default on one-example-per-line corpora): pass --temperature 0.8 to sample"),
    # greedy decoding draws no random number: another seed printed the same answer as if it were another sample
    (["--seed", "7"], "error: --seed=7 seeds sampling, but --temperature=0 decodes greedily (the default on "
     "one-example-per-line corpora): pass --temperature 0.8 to sample, or drop --seed"),
    # the user's own --temperature 0 was called the corpus's default, on running text too, whose default is 0.8
    (["--temperature", "0", "--num-samples", "3"], "error: --num-samples=3 would print the same answer 3 times, "
     "since --temperature=0 decodes greedily: pass --temperature 0.8 to sample"),
    (["--temperature", "0", "--seed", "7"], "error: --seed=7 seeds sampling, but --temperature=0 decodes greedily: "
     "pass --temperature 0.8 to sample, or drop --seed"),
    (["--temperature", "0", "--top-k", "5"], "error: --top-k=5 narrows sampling, but --temperature=0 decodes "
     "greedily: pass a --temperature > 0, such as 0.8"),
    # sampled from the likeliest token alone: three copies of one answer, printed as three samples
    (["--num-samples", "3", "--temperature", "1", "--top-k", "1"], "error: --num-samples=3 would print the same "
     "answer 3 times: --top-k 1 keeps only the likeliest token"),
])
def test_generate_user_errors_are_one_line(trained: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture, args: list[str], message: str) -> None:
    monkeypatch.chdir(trained)
    (trained / "notes.txt").write_text("not a checkpoint")
    argv = args if "--ckpt" in args else ["--ckpt", "model.pt", *args]
    assert generate.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("keeps_all", [["--top-p", "1.0"], ["--top-k", "VOCAB"], ["--top-k", "1000"]])
def test_a_top_k_or_top_p_that_keeps_every_token_is_taken_under_greedy_decoding(
        trained: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, keeps_all: list[str]) -> None:
    """--top-p 1.0 at --temperature 0 was refused as narrowing sampling, though it narrows nothing: the same greedy
    answer as without it; so is a --top-k of the whole vocabulary or more."""
    monkeypatch.chdir(trained)
    vocab = str(load_checkpoint("model.pt")[1].vocab_size)
    greedy = ["--ckpt", "model.pt", "--prompt", "two plus two equals", "--temperature", "0.0"]
    assert generate.main(greedy) == 0
    answer = capsys.readouterr().out
    assert generate.main([*greedy, *(vocab if flag == "VOCAB" else flag for flag in keeps_all)]) == 0
    assert capsys.readouterr().out == answer


def test_an_error_about_the_newest_model_names_it(trained: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture) -> None:
    """Without --ckpt generate.py picks the newest run, which may not be the one meant: its refusal says which."""
    monkeypatch.chdir(trained.parents[1])  # the newest model.pt under outputs/ is `trained`'s
    assert generate.main(["--prompt", "two plus zebra"]) == 2
    err, = capsys.readouterr().err.splitlines()
    assert err.startswith("error: word(s) 'zebra' not in the vocabulary") and \
        err.endswith(f"[model: outputs/{trained.name}/model.pt (trained on calculator), the newest; --ckpt picks "
                     "another]"), err


def test_generate_without_any_checkpoint_says_to_train_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    assert generate.main(["--prompt", "two"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line, = err.strip().splitlines()
    assert line.startswith("error: ") and "run `python train.py` first" in line


@pytest.mark.parametrize("vendor, flags, bf16", [
    ("AuthenticAMD", "fpu avx512f avx512_bf16", True),  # EPYC: bf16 autocast faster than fp32
    ("GenuineIntel", "fpu avx512f avx512_bf16 amx_bf16 amx_tile", True),  # Sapphire Rapids with AMX
    ("GenuineIntel", "fpu avx512f avx512_bf16", False),  # a Xeon without AMX: bf16 1.31x slower
    ("AuthenticAMD", "fpu avx512f avx2", False)])  # no bf16 instructions: emulated, slower
def test_auto_precision_is_bf16_only_where_the_cpu_trains_faster_in_it(tmp_path: Path, vendor: str, flags: str,
                                                                      bf16: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: a CPU\nflags\t\t: {flags}\n")
    assert precision.cpu_trains_faster_in_bf16(cpuinfo) is bf16
    assert not precision.cpu_trains_faster_in_bf16(tmp_path / "absent")  # not Linux: fp32, never an emulated bf16
    monkeypatch.setattr(precision, "cpu_trains_faster_in_bf16", lambda: bf16)
    assert precision.resolve_precision("auto", "cpu") == ("bf16-mixed" if bf16 else "32-true")
    assert precision.resolve_precision("32-true", "cpu") == "32-true"  # a precision asked for is kept
    # trainer=ddp's accelerator=auto trains on the CPU where torch sees no GPU: it was fp32 on every CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precision.resolve_precision("auto", "auto") == ("bf16-mixed" if bf16 else "32-true")


def test_lightnings_advice_to_add_dataloader_workers_is_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a machine of more than two cores every run printed it twice; workers would each replay the one seeded stream.
    from lightning.pytorch.trainer.connectors import data_connector
    from torch.utils.data import DataLoader

    import train

    monkeypatch.setattr(data_connector, "suggested_max_num_workers", lambda devices: 15)  # a 16-core machine
    for quiet in (False, True):
        with warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("always")
            if quiet:
                train.quiet_lightning()
            data_connector._worker_check(SimpleNamespace(num_devices=1), DataLoader([1, 2]), "train_dataloader")
        assert any("does not have many workers" in str(w.message) for w in shown) != quiet
