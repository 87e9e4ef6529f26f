"""The tasks: generated from a seed alone, split disjointly, and every answer right when recomputed from the prompt
by an independent reading of it; TaskData scores the answers (and the calculator's whole problems) and rebuilds its
splits from model.pt's meta."""
from __future__ import annotations

import re

import pytest
import torch
from hydra.utils import instantiate

from gpt.data.batches import IGNORE_INDEX
from gpt.data.tasks import TASKS, Example
from gpt.data.tasks.base import SampledTask, split_of
from gpt.data.tasks.calculator import words_to_number
from gpt.data.tasks.datamodule import TaskData, build_tasks, held_out_examples

SMALL = {"recall": {"pairs": 4, "queries": 3, "keys": 8, "values": 8}, "copy": {"length": 5, "vocab": 6, "blanks": 3},
         "distance": {"context": 24, "facts": 3, "keys": 8, "values": 8, "first_bucket": 4},
         "length": {"trained": 4, "vocab": 6}}
SAMPLED = [name for name, task in TASKS.items() if issubclass(task, SampledTask)]
ARITHMETIC = {"plus": int.__add__, "minus": int.__sub__, "times": int.__mul__, "divided by": int.__floordiv__}


def solve(task: str, prompt: str) -> tuple[str, str]:
    """(answer, group) read off the prompt's words, without the generators' code."""
    words = prompt.split()
    if task == "calculator":
        op = next(op for op in ARITHMETIC if f" {op} " in prompt)
        a, b = prompt.removesuffix(" equals").split(f" {op} ")
        return str(ARITHMETIC[op](words_to_number(a), words_to_number(b))), op
    if task == "recall":
        pairs = dict(zip(words[:words.index("|"):2], words[1:words.index("|"):2]))
        return pairs[words[-1]], "recall"
    if task in ("copy", "length"):
        copied = [w for w in words[:-1] if w != "_"]
        return " ".join(copied), "copy" if task == "copy" else f"length_{len(copied)}"
    key = words[-1]
    value_at = words.index(key) + 1  # the asked key occurs once in the context
    d = len(words) - 1 - value_at - 1  # tokens strictly between the value and the question's key
    first, context = SMALL["distance"]["first_bucket"], SMALL["distance"]["context"]
    hi = first
    while d > hi:  # buckets double in width from the first
        hi *= 2
    lo = 0 if hi == first else hi // 2
    return words[value_at], f"distance_{lo + 1}_{min(hi, context - 1)}"


@pytest.mark.parametrize("name", list(TASKS))
def test_answers_are_right_when_recomputed_from_the_prompt(name: str) -> None:
    task = TASKS[name](**SMALL.get(name, {}))
    for split in ("train", "val"):
        for line in task.lines(seed=1, split=split, count=200):
            example = line.example
            answer, group = solve(name, example.prompt)
            assert (str(words_to_number(example.target)) if name == "calculator" else example.target) == answer
            assert f"{example.prompt} {example.target}" == line.text
            if split == "val" or name != "length":  # training lines of `length` are all in one group
                assert example.group == group


def test_recall_answers_every_query_in_the_line() -> None:
    line = TASKS["recall"](**SMALL["recall"]).lines(seed=0, split="train", count=1)[0]
    context, queries = line.text.split(" | ")
    pairs = dict(zip(context.split()[::2], context.split()[1::2]))
    asked = queries.split()
    assert len(asked) == 2 * SMALL["recall"]["queries"] and len(set(asked[::2])) == len(asked[::2])
    assert all(pairs[key] == value for key, value in zip(asked[::2], asked[1::2]))


@pytest.mark.parametrize("name", SAMPLED)
def test_lines_follow_the_seed_and_splits_are_disjoint(name: str) -> None:
    task = TASKS[name](**SMALL[name])
    splits = {split: task.lines(seed=3, split=split, count=300) for split in ("train", "val", "test")}
    texts = {split: {line.text for line in lines} for split, lines in splits.items()}
    assert not texts["train"] & texts["val"] and not texts["train"] & texts["test"] and not texts["val"] & texts["test"]
    assert all(split_of(text) == split for split, group in texts.items() for text in group)
    assert task.lines(seed=3, split="val", count=300) == splits["val"]
    assert task.lines(seed=4, split="val", count=300) != splits["val"]
    assert set(task.vocabulary()) >= {w for lines in splits.values() for line in lines for w in line.text.split()}


@pytest.mark.parametrize("name", ["distance", "length"])
def test_held_out_groups_are_all_present_and_balanced(name: str) -> None:
    task = TASKS[name](**SMALL[name])
    groups = [line.group for line in task.lines(seed=0, split="val", count=600)]
    counts = [groups.count(g) for g in task.groups()]
    assert set(groups) == set(task.groups()) and min(counts) > 600 / len(counts) / 2, counts


def test_distance_buckets_reach_the_context() -> None:
    task = TASKS["distance"](context=64, first_bucket=8)
    assert task.buckets() == [(0, 8), (8, 16), (16, 32), (32, 63)]


def test_task_data_scores_only_answers_and_the_line_end() -> None:
    data = TaskData({"recall": SMALL["recall"]}, train_lines=64, val_lines=8, batch_size=8)
    data.setup()
    inputs, targets = data.val_set
    words = [data.tokenizer.decode([t]) for t in targets[targets != IGNORE_INDEX].tolist()]
    queries = SMALL["recall"]["queries"]
    assert len(words) == len(inputs) * (queries + 1)
    assert sum(w == "\n" for w in words) == len(inputs) and all(w.startswith("v") for w in words if w != "\n")
    # Each row is the line after a newline; its scored targets are exactly the answers of its turns.
    line = data.splits["val"][0]
    row = [data.tokenizer.decode([t]) for t in inputs[0, 1:len(line.text.split()) + 1].tolist()]
    assert row == line.text.split()
    assert data.max_tokens == 2 + 2 * SMALL["recall"]["pairs"] + 1 + 2 * queries - 1


def test_the_calculator_scores_whole_problems_and_its_split_is_every_problem() -> None:
    data = TaskData({"calculator": {"operations": ["plus"]}}, train_lines=None, val_lines=None, eval_lines=50)
    data.setup()
    inputs, targets = data.val_set
    # Every token after the line's first newline is scored: the model learns to write problems.
    assert ((targets != IGNORE_INDEX).sum(1) == torch.tensor([len(line.text.split()) + 1
                                                              for line in data.splits["val"]])).all()
    assert len(data.eval_examples) == 50 and set(data.eval_examples) < {line.example for line in data.splits["val"]}
    test = held_out_examples(data.meta, "test")  # python -m gpt evaluate grades every held-out problem
    assert len(test) == 1000 and {e.group for e in test} == {"plus"}  # a tenth of the 10,000 plus problems
    assert not {e.prompt for e in test} & {line.example.prompt for line in data.splits["train"]}


def test_mixture_meta_regenerates_the_held_out_examples() -> None:
    data = TaskData(SMALL, val_lines=20, train_lines=20)
    assert data.meta["corpus"] == "tasks" and set(data.meta["tasks"]) == set(SMALL)
    assert set(data.eval_examples) <= set(held_out_examples(data.meta, "val"))
    test = held_out_examples(data.meta, "test")
    assert len(test) == 4000 and not {e.prompt for e in test} & {e.prompt for e in data.eval_examples}
    assert all(isinstance(e, Example) for e in test)
    assert data.groups == [g for name in SMALL for g in TASKS[name](**SMALL[name]).groups()]
    assert set(data.tokenizer.encode(" ".join(e.prompt for e in test))) < set(range(data.vocab_size))


@pytest.mark.parametrize("spec, message", [
    ({"recal": {}}, "data.tasks.recal is not a task"),
    ({"recall": {"pair": 3}}, "data.tasks.recall.pair is not a knob"),
    ({"recall": {"pairs": 40}}, "pairs=40 exceeds keys=32"),
    ({"copy": {"length": 0}}, "length=0 must be a positive integer"),
    ({"distance": {"context": 8}}, "context=8 must exceed first_bucket=8"),
    ({}, "data.tasks is empty"),
])
def test_bad_knobs_are_one_clear_line(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build_tasks(spec)


def test_tokens_round_trip_through_the_model_vocabulary() -> None:
    data = TaskData(SMALL, val_lines=5, train_lines=5)
    for line in data.splits["val"]:
        assert data.tokenizer.decode(data.tokenizer.encode(line.example.target)) == line.example.target
    assert torch.tensor(data.row(data.splits["val"][0])[0]).max() < data.vocab_size


@pytest.mark.parametrize("option", ["calculator", "recall", "copy", "distance", "length", "tasks"])
def test_each_task_config_trains_as_written(option: str) -> None:
    from omegaconf import OmegaConf

    from tests.test_configs import compose_with

    cfg = compose_with(f"data={option}")
    data = instantiate(cfg.data)
    assert isinstance(data, TaskData)
    assert data.max_tokens <= cfg.model.block_size  # python train.py data=<option> needs no other override
    assert list(cfg.data.tasks) == (["recall", "copy", "distance"] if option == "tasks" else [option])
    for name, knobs in cfg.data.tasks.items():
        assert OmegaConf.to_container(knobs) == TASKS[name]().knobs()  # the YAML shows the generator's own defaults
