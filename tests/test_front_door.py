"""`python -m gpt <verb>`: one front door that lists its verbs, reads each verb's flags, and answers every
mistake with one line and exit status 2."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import generate
from gpt import GPT, ModelConfig
from gpt.__main__ import VERBS, main, parser_for
from gpt.data.tasks.calculator import Calculator, split_problems, vocabulary
from gpt.data.tasks.datamodule import TaskData
from gpt.data.tokenizers.vocab import WordTokenizer
from gpt.inference.checkpoint import DEVICE_HELP, describe, newest_checkpoint, save_model
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


def test_every_command_that_loads_a_model_says_the_same_of_its_device(capsys: pytest.CaptureFixture) -> None:
    # generate.py and evaluate each wrote the devices out, so one could drift from what check_device takes.
    with pytest.raises(SystemExit):
        generate.parse_args(["--help"])
    helps = [capsys.readouterr().out, parser_for("evaluate").format_help()]
    assert all(f"--device DEVICE {DEVICE_HELP}" in " ".join(text.split()) for text in helps), helps


def test_a_model_that_records_no_corpus_is_named_alike_by_every_command(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    # which-split said "its corpus: unrecorded" where evaluate and generate.py said "an unrecorded corpus".
    tokenizer = WordTokenizer(vocabulary())
    save_model(tmp_path / "model.pt", GPT(ModelConfig(vocab_size=tokenizer.vocab_size, dim=8, heads=2, layers=1)),
               tokenizer)
    assert describe(tmp_path / "model.pt", {}) == f"model: {tmp_path / 'model.pt'} (trained on an unrecorded corpus)"
    assert main(["which-split", "two plus three equals", "--model", str(tmp_path)]) == 2
    assert main(["evaluate", "--ckpt", str(tmp_path)]) == 2
    which_split, evaluate = capsys.readouterr().err.splitlines()
    assert which_split == f"error: {tmp_path} was trained on an unrecorded corpus, not the calculator: which-split " \
                          "places calculator problems"
    assert evaluate.startswith(f"error: {tmp_path / 'model.pt'} was trained on an unrecorded corpus, which has no ")


@pytest.mark.parametrize("argv, message", [
    (["prepar", "x.txt"], "error: 'prepar' is not a verb of python -m gpt; did you mean prepare?"),
    (["evaluate", "--split", "train"], "error: argument --split: invalid choice: 'train'"),
    (["export"], "error: the following arguments are required: --to"),
    # "no run folders under no/such/sweep" left the user to find the typo: the path itself is not there
    (["report", str(Path("no") / "such" / "sweep")], f"error: {Path('no') / 'such' / 'sweep'} does not exist: pass "
                                                     "the folder of a sweep"),
    (["report", __file__], f"error: {__file__} is a file: pass the folder of a sweep"),
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


def test_a_flag_spelt_with_underscores_is_named_with_its_dashes(capsys: pytest.CaptureFixture) -> None:
    """Python 3.11's argparse said only "unrecognized arguments: --top_k 5", suggesting nothing."""
    with pytest.raises(ValueError, match=r"^unrecognized arguments: --top_k 5: did you mean --top-k\? \(see python "
                                         r"generate.py --help\)$"):
        generate.parse_args(["--top_k", "5"])
    assert main(["prepare", "x.txt", "--num_proc=2"]) == 2
    assert capsys.readouterr().err == ("error: unrecognized arguments: --num_proc=2: did you mean --num-proc? (see "
                                       "python -m gpt prepare --help)\n")


@pytest.mark.parametrize("prompt, lowercase", [("Two plus two equals", "'two'"),
                                               ("TWO times Three equals Six", "'two', 'three', 'six'")])
def test_which_split_gives_generates_hint_for_a_capitalised_word(prompt: str, lowercase: str,
                                                                capsys: pytest.CaptureFixture) -> None:
    """It said only "is not a calculator problem", where generate.py says to try lowercase."""
    hint = f"; the vocabulary has {lowercase}: try lowercase"
    with pytest.raises(ValueError, match=f"{re.escape(hint)}$"):  # what generate.py says of the same words
        WordTokenizer(vocabulary()).encode(prompt)
    assert main(["which-split", prompt]) == 2
    assert capsys.readouterr().err == f"error: {prompt!r} is not a calculator problem{hint}\n"


def test_which_split_names_the_split_of_a_problem(capsys: pytest.CaptureFixture) -> None:
    held_out = split_problems(0, 0.1, 0.1)["test"][0]
    assert main(["which-split", held_out.prompt]) == 0
    assert capsys.readouterr().out == \
        f"{held_out.prompt!r} is in the test split of data.seed=0: held out from training\n"
    assert main(["which-split", f"{held_out.prompt} {held_out.target}"]) == 0  # a corpus line, its answer included
    assert capsys.readouterr().out.startswith(f"{held_out.prompt!r} is in the test split")
    assert main(["which-split", f"{held_out.prompt} {held_out.target}"]) == 0
    assert "its answer is" not in capsys.readouterr().out
    assert main(["which-split", f"{held_out.prompt} zero zero"]) == 0  # a wrong answer was taken without a word
    assert capsys.readouterr().out.endswith(f": held out from training (its answer is {held_out.target!r}, not "
                                            "'zero zero')\n")


def test_which_split_reads_a_model_s_seed_fractions_and_operations(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """A model trained with data.seed=3, val_fraction=0.3 and plus alone: answered from the flags' defaults, its
    held-out problems read as trained on, and problems it never saw (times) as in its training split. It is named
    by --ckpt, as generate.py, evaluate and export name it (--model, its first name, still works)."""

    task = Calculator(val_fraction=0.3, operations=("plus",))
    tokenizer = WordTokenizer(vocabulary())
    meta = {"corpus": "calculator", "one_example_per_line": True, "seed": 3, "tasks": {"calculator": task.knobs()}}
    save_model(tmp_path / "model.pt", GPT(ModelConfig(vocab_size=tokenizer.vocab_size, dim=8, heads=2, layers=1)),
               tokenizer, meta)
    splits = split_problems(3, 0.3, 0.1)
    held = next(p for p in splits["val"] if p.op == "plus" and p in split_problems(0, 0.1, 0.1)["train"])
    assert main(["which-split", held.prompt, "--ckpt", str(tmp_path)]) == 0  # the run folder holding model.pt
    assert capsys.readouterr().out == (f"{held.prompt!r} is in the val split of data.seed=3 (val_fraction=0.3, "
                                       "test_fraction=0.1): held out from training\n")
    unseen = next(p for p in splits["train"] if p.op == "times")
    assert main(["which-split", unseen.prompt, "--model", str(tmp_path / "model.pt")]) == 0
    assert "which this run's corpus leaves out (operations: plus): never trained on" in capsys.readouterr().out
    assert main(["which-split", held.prompt, "--ckpt", str(tmp_path), "--seed", "3"]) == 2
    assert capsys.readouterr().err == "error: --ckpt reads the run's own data.seed and fractions: drop --seed\n"
    save_model(tmp_path / "text.pt", GPT(ModelConfig(vocab_size=tokenizer.vocab_size, dim=8, heads=2, layers=1)),
               tokenizer, {"corpus": "shakespeare.txt"})
    assert main(["which-split", held.prompt, "--ckpt", str(tmp_path / "text.pt")]) == 2
    assert "text.pt was trained on shakespeare.txt, not the calculator: which-split places calculator problems" \
        in capsys.readouterr().err


def test_which_split_reads_the_training_lines_a_model_was_trained_on(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """A run with data.train_lines=1000 trains on the first 1,000 problems of its training split: the others were
    called trained on."""
    data = TaskData({"calculator": {}}, train_lines=1000)
    tokenizer = data.tokenizer
    save_model(tmp_path / "model.pt", GPT(ModelConfig(vocab_size=tokenizer.vocab_size, dim=8, heads=2, layers=1)),
               tokenizer, data.meta)
    trained = {line.turns[0].given for line in data.splits["train"]}
    unseen = next(p for p in split_problems(0, 0.1, 0.1)["train"] if p.prompt not in trained)
    seen = next(iter(trained))
    assert main(["which-split", unseen.prompt, "--model", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (f"{unseen.prompt!r} is in the train split of data.seed=0, past the first "
                                       "data.train_lines=1000 of it that this run trained on: never trained on\n")
    assert main(["which-split", seen, "--model", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"{seen!r} is in the train split of data.seed=0: trained on\n"


def test_which_split_follows_the_run_s_fractions(capsys: pytest.CaptureFixture) -> None:
    # A run with other fractions cuts its splits elsewhere; answering from the default cuts called its held-out
    # problems trained on (and trained ones held out).
    splits = split_problems(0, 0.3, 0.1)
    problem = next(p for p in splits["val"] if p not in split_problems(0, 0.1, 0.1)["val"])
    assert main(["which-split", problem.prompt, "--val-fraction", "0.3"]) == 0
    assert f"{problem.prompt!r} is in the val split of data.seed=0" in capsys.readouterr().out
