"""The tasks: generated from a seed alone, split disjointly, every answer of every line right (and in the right group
and level) when recomputed from its prompt by an independent reading of it, every knob composing; TaskData scores
the answers (and the calculator's whole problems) and rebuilds its splits from model.pt's meta."""
from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from hydra.utils import instantiate

from gpt.data.batches import IGNORE_INDEX
from gpt.data.tasks import TASKS, Example
from gpt.data.tasks.base import SampledTask, doubling, split_of
from gpt.data.tasks.calculator import words_to_number
from gpt.data.tasks.datamodule import TaskData, encode_line, held_out
from gpt.data.tasks.spec import build_tasks

SMALL = {"recall": {"pairs": (2, 4), "keys": 8, "values": 8}, "copy": {"length": 5, "vocab": 6, "blanks": 3},
         "distance": {"length": 40, "queries": 3, "distractors": 1, "keys": 8, "values": 8, "first_bucket": 4,
                      "farthest": 16},
         "length": {"trained": 4, "vocab": 6}}
SAMPLED = [name for name, task in TASKS.items() if issubclass(task, SampledTask)]
MIXABLE = {name: knobs for name, knobs in SMALL.items() if not TASKS[name].runs_alone}
ARITHMETIC = {"plus": int.__add__, "minus": int.__sub__, "times": int.__mul__, "divided by": int.__floordiv__}


def bucket(value: int, first: int) -> tuple[int, int]:
    """The (lo, hi] range of doubling width from (0, first] that holds value."""
    lo, hi = 0, first
    while value > hi:
        lo, hi = hi, 2 * hi
    return lo, hi


def solve(task: str, prompt: str) -> tuple[str, str, int | None, float | None]:
    """(answer, group, level, chance of a guess) read off the prompt's words, without the generators' code."""
    words = prompt.split()
    if task == "calculator":
        op = next(op for op in ARITHMETIC if f" {op} " in prompt)
        a, b = prompt.removesuffix(" equals").split(f" {op} ")
        return str(ARITHMETIC[op](words_to_number(a), words_to_number(b))), op, None, None
    if task == "recall":
        context, asked = words[:words.index("|")], words[words.index("|") + 1:-1:2]
        pairs = dict(zip(context[::2], context[1::2]))
        unasked = {value for key, value in pairs.items() if key not in asked}  # what elimination leaves
        return pairs[words[-1]], f"recall_{len(pairs)}", len(pairs), 1 / len(unasked)
    if task in ("copy", "length"):
        copied = [w for w in words[:-1] if w != "_"]
        chance = 1 / SMALL[task]["vocab"]
        if task == "copy":
            return " ".join(copied), "copy", None, chance
        lo, hi = bucket(len(copied), SMALL["length"]["trained"])
        return " ".join(copied), f"length_{lo + 1}_{hi}", len(copied), chance
    if task == "distance":
        key = words[-1]
        value_at = words.index(key) + 1  # the asked key's fact is its first occurrence
        d = len(words) - 1 - value_at - 1  # tokens strictly between the value and the question's key
        lo, hi = bucket(d, SMALL["distance"]["first_bucket"])
        asked = {words[i + 1] for i, w in enumerate(words[:-2]) if w == "?"}
        facts = {words[i + 1] for i, w in enumerate(words[:-1])
                 if w.startswith("k") and (i == 0 or words[i - 1] != "?") and w not in asked}
        return words[value_at], f"distance_{lo + 1}_{hi}", d, 1 / len(facts)
    # A new task fell through to distance's reading and failed with an IndexError deep inside it.
    pytest.fail(f"solve() in tests/test_tasks.py cannot read {task}'s prompts: add a branch that computes its answer, "
                "group, level and chance from the prompt's words, without the task's own code")


@pytest.mark.parametrize("name", list(TASKS))
def test_every_answer_is_right_when_recomputed_from_the_prompt(name: str) -> None:
    task = TASKS[name](**SMALL.get(name, {}))
    for split in ("train", "val"):
        for line in task.lines(seed=1, split=split, count=200):
            examples = line.examples
            assert f"{examples[-1].prompt} {examples[-1].target}" == line.text and examples[-1].last
            assert not any(e.last for e in examples[:-1])
            for example in examples:
                answer, group, level, chance = solve(name, example.prompt)
                assert (str(words_to_number(example.target)) if name == "calculator" else example.target) == answer
                assert (example.group, example.level, example.chance) == (group, level, chance)


def test_recall_asks_every_key_of_lines_that_mix_pair_counts() -> None:
    lines = TASKS["recall"](**SMALL["recall"]).lines(seed=0, split="train", count=100)
    for line in lines:
        context, queries = line.text.split(" | ")
        pairs = dict(zip(context.split()[::2], context.split()[1::2]))
        asked = queries.split()
        assert sorted(asked[::2]) == sorted(pairs) and all(pairs[k] == v for k, v in zip(asked[::2], asked[1::2]))
    assert {len(line.turns) for line in lines} == {2, 4}
    assert all(line.examples[-1].chance == 1 for line in lines)  # the last key asked: elimination knows its value


def test_distance_asks_one_question_per_bucket_within_the_line() -> None:
    task = TASKS["distance"](**SMALL["distance"])
    for line in task.lines(seed=0, split="val", count=100):
        assert sorted(e.group for e in line.examples) == sorted(task.groups())
        assert len(line.text.split()) <= SMALL["distance"]["length"]
        keys = [w for w in line.text.split() if w.startswith("k")]
        facts = SMALL["distance"]["queries"] + SMALL["distance"]["distractors"]
        assert len(set(keys)) <= facts and len(keys) - len(set(keys)) == SMALL["distance"]["queries"]


@pytest.mark.parametrize("name", SAMPLED)
def test_lines_follow_the_seed_and_splits_are_disjoint(name: str) -> None:
    task = TASKS[name](**SMALL.get(name, {}))
    splits = {split: task.lines(seed=3, split=split, count=300) for split in ("train", "val", "test")}
    texts = {split: {line.text for line in lines} for split, lines in splits.items()}
    assert not texts["train"] & texts["val"] and not texts["train"] & texts["test"] and not texts["val"] & texts["test"]
    assert all(split_of(line.split_key) == split for split, lines in splits.items() for line in lines)
    assert task.lines(seed=3, split="val", count=300) == splits["val"]
    assert task.lines(seed=4, split="val", count=300) != splits["val"]
    assert set(task.vocabulary()) >= {w for lines in splits.values() for line in lines for w in line.text.split()}


@pytest.mark.parametrize("name, knobs", [("recall", {"pairs": 3, "keys": 4, "values": 2}),
                                         ("distance", {"length": 24, "queries": 2, "distractors": 0, "keys": 8,
                                                       "values": 8, "first_bucket": 4, "farthest": 8})])
def test_no_held_out_answer_is_trained_on(name: str, knobs: dict[str, Any]) -> None:
    # Small knobs make lines that share their first answers and differ only after them common; a split by the whole
    # text put about a quarter of such held-out answers, prompt and all, into training lines too.
    task = TASKS[name](**knobs)
    trained = {(e.prompt, e.target) for line in task.lines(seed=0, split="train", count=2000) for e in line.examples}
    for split in ("val", "test"):
        graded = {(e.prompt, e.target) for line in task.lines(seed=0, split=split, count=200) for e in line.examples}
        assert not graded & trained


@pytest.mark.parametrize("name", ["distance", "length"])
def test_held_out_groups_are_all_present_and_filled(name: str) -> None:
    task = TASKS[name](**SMALL[name])
    groups = [e.group for line in task.lines(seed=0, split="val", count=600) for e in line.examples]
    counts = [groups.count(g) for g in task.groups()]
    assert set(groups) == set(task.groups()) and min(counts) > len(groups) / len(counts) / 2, counts


def test_length_grades_every_length_up_to_four_times_the_trained_one() -> None:
    task = TASKS["length"](**SMALL["length"])
    held_out = {e.level for line in task.lines(seed=0, split="val", count=600) for e in line.examples}
    trained = {e.level for line in task.lines(seed=0, split="train", count=300) for e in line.examples}
    assert held_out == set(range(1, 17)) and trained == set(range(1, 5))
    assert task.groups() == ["length_1_4", "length_5_8", "length_9_16"]


def test_unique_tokens_never_repeat_in_a_line() -> None:
    for name, knobs in (("copy", {"length": 8, "vocab": 8, "unique": True}),
                        ("length", {"trained": 4, "vocab": 16, "unique": True})):
        for line in TASKS[name](**knobs).lines(seed=0, split="val", count=200):
            copied = line.examples[-1].target.split()
            assert len(set(copied)) == len(copied)


def test_doubling_ranges_end_where_asked() -> None:
    assert doubling(8, 64) == [(0, 8), (8, 16), (16, 32), (32, 64)]
    assert doubling(8, 63) == [(0, 8), (8, 16), (16, 32), (32, 63)] and doubling(8, 8) == [(0, 8)]
    assert doubling(8, 5) == [(0, 5)]  # evaluate --lengths shorter than block_size: no range past the last position


def test_task_data_scores_only_answers_and_the_line_end() -> None:
    data = TaskData({"recall": SMALL["recall"]}, train_lines=64, val_lines=8, batch_size=8)
    data.setup()
    inputs, targets = data.val_set
    lines = data.splits["val"]
    words = [data.tokenizer.decode([t]) for t in targets[targets != IGNORE_INDEX].tolist()]
    assert len(words) == sum(len(line.turns) + 1 for line in lines)  # every answer, and each line's end
    assert sum(w == "\n" for w in words) == len(inputs) and all(w.startswith("v") for w in words if w != "\n")
    # Each row is the line after a newline; the answer spans say where each turn's answer lies.
    ids, _, spans = encode_line(data.tokenizer, lines[0])
    assert [data.tokenizer.decode([t]) for t in inputs[0, 1:len(lines[0].text.split()) + 1].tolist()] == \
        lines[0].text.split()
    assert [data.tokenizer.decode(ids[a:b]) for a, b in spans] == [e.target for e in lines[0].examples]
    assert data.max_tokens == 4 * max(SMALL["recall"]["pairs"]) + 2


def test_the_block_size_asked_for_holds_the_test_lines_evaluate_grades() -> None:
    # The length task's held-out lines run to 4x its training lines: a few validation lines may all be shorter.
    data = TaskData({"length": SMALL["length"]}, train_lines=50, val_lines=2)
    longest = max(len(encode_line(data.tokenizer, line)[0]) for line in held_out(data.meta, "test")) - 1
    assert longest == 2 * 4 * SMALL["length"]["trained"] + 2 and data.max_tokens == longest


def test_the_calculator_scores_whole_problems_and_its_split_is_every_problem() -> None:
    data = TaskData({"calculator": {"operations": ["plus"]}}, train_lines=None, val_lines=None, eval_lines=50)
    data.setup()
    inputs, targets = data.val_set
    # Every token after the line's first newline is scored: the model learns to write problems.
    assert ((targets != IGNORE_INDEX).sum(1) == torch.tensor([len(line.text.split()) + 1
                                                              for line in data.splits["val"]])).all()
    assert len(data.graded_lines) == 50 and set(data.graded_lines) < set(data.splits["val"])
    test = held_out(data.meta, "test")  # python -m gpt evaluate grades every held-out problem
    assert len(test) == 1000 and {e.group for line in test for e in line.examples} == {"plus"}
    assert not {line.text for line in test} & {line.text for line in data.splits["train"]}


def test_more_calculator_lines_than_its_split_holds_are_refused() -> None:
    # Not the split cut short: a sweep over data.train_lines would train its largest counts on the same problems.
    division = {"calculator": {"operations": ["divided by"]}}
    held = len(TaskData(division, train_lines=None, val_lines=None).splits["val"])
    assert len(TaskData(division, train_lines=None, val_lines=held).splits["val"]) == held
    with pytest.raises(ValueError, match=f"data.val_lines={held + 1} asks for more than the {held} lines of "
                                         "calculator's val split"):
        TaskData(division, train_lines=None, val_lines=held + 1).splits


def test_a_held_out_split_of_repeats_is_said_to_rest_on_its_distinct_lines() -> None:
    """600 val lines of a 3-token copy over 3 words are a couple of lines drawn again and again: its exact match "of
    600" overstated the evidence. A mixture's tasks are counted apart: the large recall task does not hide it."""
    small = {"copy": {"length": 3, "vocab": 3, "unique": True}, "recall": {}}
    data = TaskData(small, train_lines=20, val_lines=600)
    distinct = len({line.text for line in data.graded_lines if line.task == "copy"})
    assert distinct < 6 and data.notes == [
        f"copy's 600 val lines are {distinct} distinct line{'s' * (distinct > 1)} drawn again and again: its accuracy "
        f"rests on {distinct}, not 600; make the task larger, or lower data.val_lines"]
    assert TaskData({"copy": {}}, train_lines=20, val_lines=600).notes == []  # 16 tokens over 16 words: no repeats


def test_mixture_meta_regenerates_the_held_out_lines() -> None:
    data = TaskData(MIXABLE, val_lines=20, train_lines=20)
    assert data.meta["corpus"] == "tasks" and set(data.meta["tasks"]) == set(MIXABLE)
    assert set(data.graded_lines) <= set(held_out(data.meta, "val"))
    test = held_out(data.meta, "test")
    assert len(test) == sum(TASKS[name].held_out_lines for name in MIXABLE)
    assert not {line.text for line in test} & {line.text for line in data.graded_lines}
    assert all(isinstance(e, Example) for line in test for e in line.examples)
    assert data.groups == [g for name in MIXABLE for g in TASKS[name](**MIXABLE[name]).groups()]
    assert set(data.tokenizer.encode(" ".join(line.text for line in test))) < set(range(data.vocab_size))


@pytest.mark.parametrize("spec, message", [
    ({"recal": {}}, "data.tasks.recal is not a task; choose from calculator, recall, copy, distance, length; did "
                    "you mean data.tasks.recall?"),
    ({"recall": {"pair": 3}}, "data.tasks.recall.pair is not a knob of recall; its knobs: keys, pairs, queries, "
                              "values; did you mean data.tasks.recall.pairs?"),
    ({"recall": {"pairs": 40}}, "pairs=40 exceeds keys=32"),
    ({"copy": {"length": 0}}, "length=0 must be a positive integer"),
    ({"distance": {"length": 20}}, "length=20 cannot hold a question 64 tokens after its fact"),
    ({"distance": {"farthest": 4}}, "farthest=4 is below first_bucket=8"),
    ({"recall": {"pairs": [4, 8], "queries": 6}}, "queries=6 exceeds pairs=4"),
    ({"copy": {"unique": True, "vocab": 8}}, "unique=true draws 16 different tokens from vocab=8"),
    ({"length": {"unique": True}}, "raise data.tasks.length.vocab to at least 32"),
    ({}, "data.tasks is empty"),
    ({"recall": {"pairs": []}}, "data.tasks.recall.pairs=[] names no pair count"),
    ({"recall": {"pairs": [4, 8, 4]}}, "data.tasks.recall.pairs=[4, 8, 4] lists 4 twice: list each pair count "
                                       "once"),
    ({"calculator": {"operations": ["plus", "plus"]}}, "data.tasks.calculator.operations=['plus', 'plus'] lists "
                                                       "plus twice: list each operation once"),
    ({"calculator": {"operations": []}}, "data.tasks.calculator.operations=[] names no operation"),
    ({"recall": {}, "length": {}}, "data.tasks.length runs alone (data=length): lines of recall can train the "
                                   "positions"),
])
def test_bad_knobs_are_one_clear_line(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build_tasks(spec)


@pytest.mark.parametrize("spec, message", [
    ({"zzzz": {}}, "data.tasks.zzzz is not a task; choose from calculator, recall, copy, distance, length"),
    ({"recall": {"zzzz": 3}}, "data.tasks.recall.zzzz is not a knob of recall; its knobs: keys, pairs, queries, "
                              "values"),
])
def test_a_name_near_none_is_told_what_there_is_alone(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        build_tasks(spec)


def test_a_calculator_split_without_an_operation_is_one_clear_line() -> None:
    """val_fraction 0.0005 of the 229 divisions rounds to none: the run ended in 'not enough values to unpack'."""
    data = TaskData({"calculator": {"operations": ["divided by"], "val_fraction": 0.0005}}, train_lines=None,
                    val_lines=None)
    with pytest.raises(ValueError, match=r"^data.tasks.calculator: the val split holds no divided by problem at "
                                         r"val_fraction=0.0005 and test_fraction=0.1: raise them$"):
        data.max_tokens


def test_tokens_round_trip_through_the_model_vocabulary() -> None:
    data = TaskData(MIXABLE, val_lines=5, train_lines=5)
    for line in data.splits["val"]:
        for example in line.examples:
            assert data.tokenizer.decode(data.tokenizer.encode(example.target)) == example.target
    assert torch.tensor(encode_line(data.tokenizer, data.splits["val"][0])[0]).max() < data.vocab_size


@pytest.mark.parametrize("option", [*TASKS, "tasks"])
def test_each_task_config_trains_as_written(option: str) -> None:
    from omegaconf import OmegaConf

    from tests.test_configs import CONFIGS, compose_with

    cfg = compose_with(f"data={option}")  # every registered task has its configs/data/<name>.yaml
    data = instantiate(cfg.data)
    assert isinstance(data, TaskData)
    assert data.max_tokens <= cfg.model.block_size  # python train.py data=<option> needs no other override
    mixed = [name for name in OmegaConf.load(CONFIGS / "data/tasks.yaml").defaults if name != "_self_"]
    assert list(cfg.data.tasks) == (mixed if option == "tasks" else [option])
    for name, knobs in cfg.data.tasks.items():
        assert OmegaConf.to_container(knobs) == TASKS[name]().knobs()  # the YAML shows the generator's own defaults
