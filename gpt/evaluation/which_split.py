"""`python -m gpt which-split`: whether a calculator problem was trained on or held out, under the data.seed and
split fractions given as flags, or read from a trained model.pt (its run's seed, fractions, operations and
data.train_lines)."""
from __future__ import annotations

import argparse
from pathlib import Path

from gpt.data.tasks.calculator import Calculator, split_problems
from gpt.data.tasks.spec import build_tasks
from gpt.validate import Fraction, check_value

RUN_FLAGS = ("seed", "val_fraction", "test_fraction")  # what --ckpt reads from the run instead


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", help='a problem as the corpus writes it, with or without its answer, e.g. "two '
                                       'plus three equals"')
    # --ckpt as generate.py, evaluate and export name a model.pt; --model, its first name, stays for old commands
    parser.add_argument("--ckpt", "--model", type=Path, help="a model.pt (or its run folder) trained on the "
                        "calculator: its run's data.seed, fractions and operations instead of the flags")
    parser.add_argument("--seed", type=int, help="the data.seed of the training run (default: 0)")
    parser.add_argument("--val-fraction", type=float,
                        help=f"its data.tasks.calculator.val_fraction (default: {Calculator.val_fraction})")
    parser.add_argument("--test-fraction", type=float,
                        help=f"its data.tasks.calculator.test_fraction (default: {Calculator.test_fraction})")


def from_flags(args: argparse.Namespace) -> tuple[int, Calculator]:
    """The data.seed and calculator the flags describe. The run's fractions move the cuts, so they are checked as
    training checks them but named as this verb's flags, not as the config keys they stand for."""
    for flag, value in (("--val-fraction", args.val_fraction), ("--test-fraction", args.test_fraction)):
        if value is not None:
            check_value(flag, value, Fraction)
    val = Calculator.val_fraction if args.val_fraction is None else args.val_fraction
    test = Calculator.test_fraction if args.test_fraction is None else args.test_fraction
    if val + test >= 1:
        raise ValueError(f"--val-fraction {val} and --test-fraction {test} leave nothing to train on: their sum "
                         "must be below 1")
    return (0 if args.seed is None else args.seed), Calculator(val_fraction=val, test_fraction=test)


def from_model(path: Path) -> tuple[int, Calculator, int | None]:
    """The data.seed, calculator and data.train_lines (None: every training problem) a model.pt was trained with,
    from the metadata train.py saves in it."""
    from gpt.inference.checkpoint import corpus_of, read_checkpoint  # torch: only when a model.pt is read

    meta = read_checkpoint(path, "to place a problem in its splits").get("meta", {})
    tasks = build_tasks(meta["tasks"]) if "tasks" in meta else ()
    calculator = next((task for task in tasks if isinstance(task, Calculator)), None)
    if calculator is None or "seed" not in meta:
        raise ValueError(f"{path} was trained on {corpus_of(meta)}, not the calculator: which-split places "
                         "calculator problems")
    return meta["seed"], calculator, meta.get("train_lines")


def run(args: argparse.Namespace) -> None:
    """`python -m gpt which-split "thirty five plus eighty six equals"`: which split of data.seed it is in."""
    problem_words, _, answer = " ".join(args.prompt.split()).partition(" equals")
    prompt = problem_words + " equals"  # a corpus line: its answer dropped (and checked below)
    if args.ckpt is not None:
        given = [f"--{flag.replace('_', '-')}" for flag in RUN_FLAGS if getattr(args, flag) is not None]
        if given:
            raise ValueError(f"--ckpt reads the run's own data.seed and fractions: drop {' '.join(given)}")
        seed, task, lines = from_model(args.ckpt)
    else:
        (seed, task), lines = from_flags(args), None
    split, problem = next(((name, p) for name, problems in split_problems(seed, task.val_fraction,
                                                                          task.test_fraction).items()
                           for p in problems if p.prompt == prompt), (None, None))
    if problem is None:
        from gpt.data.tokenizers.base import lowercase_hint  # numpy and tiktoken: only for a problem not found

        if hint := lowercase_hint(args.prompt.split(), task.vocabulary()):  # "Two plus two equals", as generate.py
            raise ValueError(f"{args.prompt!r} is not a calculator problem{hint}")
        raise ValueError(f"{args.prompt!r} is not a calculator problem: two numbers 0..99 in words around plus, "
                         "minus, times or divided by (an exact, non-negative answer), e.g. \"two plus three equals\"")
    fractions = "" if (task.val_fraction, task.test_fraction) == (Calculator.val_fraction, Calculator.test_fraction) \
        else f" (val_fraction={task.val_fraction}, test_fraction={task.test_fraction})"
    where = f"the {split} split of data.seed={seed}{fractions}"
    if problem.op not in task.groups():  # the run trained on some operations only: this one it never saw
        print(f"{prompt!r} is {problem.op}, which this run's corpus leaves out (operations: "
              f"{', '.join(task.groups())}): never trained on ({where} of all four)")
        return
    if split == "train" and lines is not None \
            and all(line.turns[0].given != prompt for line in task.lines(seed, "train", lines)):
        print(f"{prompt!r} is in {where}, past the first data.train_lines={lines} of it that this run trained on: "
              "never trained on")
        return
    seen = "trained on" if split == "train" else "held out from training"
    answer = answer.strip()
    wrong = f" (its answer is {problem.target!r}, not {answer!r})" if answer not in ("", problem.target) else ""
    print(f"{prompt!r} is in {where}: {seen}{wrong}")
