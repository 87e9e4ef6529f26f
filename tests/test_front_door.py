"""`python -m gpt <verb>`: one front door that lists its verbs, reads each verb's flags, and answers every
mistake with one line and exit status 2."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from gpt.__main__ import VERBS, main, parser_for
from gpt.data.tasks.calculator import split_problems
from gpt.inference.checkpoint import newest_checkpoint
from tests.conftest import run_cli


def test_help_lists_every_verb_with_what_it_does(tmp_path: Path) -> None:
    result = run_cli("-m", "gpt", "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    for verb, (_, what) in VERBS.items():
        assert f"  {verb}" in result.stdout and what in result.stdout


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_reads_its_own_help(verb: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        parser_for(verb).parse_args(["--help"])
    assert exit_.value.code == 0 and f"python -m gpt {verb}" in capsys.readouterr().out


@pytest.mark.parametrize("verb", ["evaluate", "export"])
def test_the_help_names_every_folder_the_default_checkpoint_is_taken_from(verb: str) -> None:
    # It said "the newest under outputs/" while a sweep's newer model.pt under multirun/ was the one taken.
    text = " ".join(parser_for(verb).format_help().split())
    roots = inspect.signature(newest_checkpoint).parameters["roots"].default
    assert all(f"{root}/" in text for root in roots), text


@pytest.mark.parametrize("argv, message", [
    (["prepar", "x.txt"], "error: 'prepar' is not a verb of python -m gpt; did you mean prepare?"),
    (["evaluate", "--split", "train"], "error: argument --split: invalid choice: 'train'"),
    (["export"], "error: the following arguments are required: --to"),
    (["report", str(Path("no") / "such" / "sweep")], "error: no run folders"),
    (["which-split", "two plus zebra equals"], "error: 'two plus zebra equals' is not a calculator problem"),
    # A verb's mistake names its own flag: it said data.tasks.calculator.val_fraction=2.0, a key this command has not.
    (["which-split", "two plus three equals", "--val-fraction", "2"], "error: --val-fraction=2.0 must be a number in "
                                                                      "(0, 1)"),
    (["which-split", "two plus three equals", "--test-fraction", "nan"], "error: --test-fraction=nan must be"),
    (["which-split", "two plus three equals", "--val-fraction", "0.5", "--test-fraction", "0.5"],
     "error: --val-fraction 0.5 and --test-fraction 0.5 leave nothing to train on"),
])
def test_a_mistake_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_which_split_names_the_split_of_a_problem(capsys: pytest.CaptureFixture) -> None:
    held_out = split_problems(0, 0.1, 0.1)["test"][0]
    assert main(["which-split", held_out.prompt]) == 0
    assert capsys.readouterr().out == \
        f"{held_out.prompt!r} is in the test split of data.seed=0: held out from training\n"
    assert main(["which-split", f"{held_out.prompt} {held_out.target}"]) == 0  # a corpus line, its answer included
    assert capsys.readouterr().out.startswith(f"{held_out.prompt!r} is in the test split")


def test_which_split_follows_the_run_s_fractions(capsys: pytest.CaptureFixture) -> None:
    # A run with other fractions cuts its splits elsewhere; answering from the default cuts called its held-out
    # problems trained on (and trained ones held out).
    splits = split_problems(0, 0.3, 0.1)
    problem = next(p for p in splits["val"] if p not in split_problems(0, 0.1, 0.1)["val"])
    assert main(["which-split", problem.prompt, "--val-fraction", "0.3"]) == 0
    assert f"{problem.prompt!r} is in the val split of data.seed=0" in capsys.readouterr().out
