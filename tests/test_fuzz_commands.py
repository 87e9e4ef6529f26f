"""generate.py's flags and prompts and `python -m gpt <verb>`'s arguments, fuzzed: every command line either does its
work (exit 0) or is one line on stderr and exit 2, never a traceback. Prompts include text outside the model's
vocabulary; files include missing, foreign and empty ones."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import generate
from gpt import GPT, ModelConfig
from gpt.__main__ import main as cli
from gpt.data.tokenizers.vocab import CharTokenizer
from gpt.inference.checkpoint import save_model
from tests.conftest import calculator_tokenizer, play
from tests.fuzzing import ODD_TEXT, assert_clean, call, scaled

NUMBERS = st.one_of(st.integers(-3, 12).map(str), st.sampled_from(["0", "-0", "1e3", "2.5", "", "x", "1_000", "٣"]),
                    st.sampled_from([str(10**30), str(-10**30), str(2**64), str(2**70)]))
FLOATS = st.one_of(st.floats(-1, 2).map(repr), st.sampled_from(["nan", "inf", "-inf", "1e-300", "1e400", "", "x"]))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the flags name, as {name} in a command line: a running-text model.pt ({text}, in {text_run}) and a
    line-based one ({calc}), corpora ({play}, {jsonl}), and files that are none of these."""
    root = tmp_path_factory.mktemp("fuzz")
    torch.manual_seed(0)
    (root / "text_run").mkdir()
    save_model(root / "text_run" / "model.pt", GPT(ModelConfig(vocab_size=5, layers=1, heads=1, dim=8, block_size=8)),
               CharTokenizer(list("\nab c")), {"corpus": "text"})
    words = calculator_tokenizer()
    (root / "calc").mkdir()
    save_model(root / "calc" / "model.pt", GPT(ModelConfig(vocab_size=words.vocab_size, layers=1, heads=1, dim=8,
                                                           block_size=16)), words,
               {"corpus": "calculator", "one_example_per_line": True, "seed": 0,
                "tasks": {"calculator": {"val_fraction": 0.1, "test_fraction": 0.1, "operations": None}}})
    (root / "play.txt").write_text(play(40))
    (root / "play.jsonl").write_text("".join(json.dumps({"text": line}) + "\n" for line in play(40).splitlines()))
    (root / "empty.txt").write_text("")
    (root / "latin1.txt").write_bytes("na\u00efve\n".encode("latin-1"))
    (root / "empty").mkdir()
    return root


NAMES = {"text": "text_run/model.pt", "text_run": "text_run", "calc": "calc", "play": "play.txt",
         "jsonl": "play.jsonl", "empty_file": "empty.txt", "latin1": "latin1.txt", "empty": "empty", "missing": "nope"}
PATHS = st.sampled_from([f"{{{name}}}" for name in NAMES])


def resolved(argv: list[str], files: Path, case: str) -> list[str]:
    """The command line with each {name} replaced by its path; {case} is a fresh folder of this case's own."""
    for name, path in {**NAMES, "case": case}.items():
        argv = [a.replace(f"{{{name}}}", str(files / path)) for a in argv]
    return argv


def mostly(valid: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A value a user means five times in six, else an odd one: a command line of several flags is then
    often entirely valid, so the work behind the flags runs too, not only their checks."""
    return st.one_of(valid, valid, valid, valid, valid, odd)


def ints(low: int, high: int) -> st.SearchStrategy[str]:
    return mostly(st.integers(low, high).map(str), NUMBERS)


def floats(low: float, high: float) -> st.SearchStrategy[str]:
    return mostly(st.floats(low, high).map(repr), FLOATS)


def flags(options: dict[str, st.SearchStrategy[str]]) -> st.SearchStrategy[list[str]]:
    """Some of `options`, each with a drawn value, in a drawn order; now and then a flag that does not exist."""
    pairs = st.lists(st.sampled_from(sorted(options)).flatmap(lambda f: options[f].map(lambda v: [f, v])),
                     max_size=5)
    unknown = st.one_of(*[st.just([])] * 7, st.sampled_from([["--nope"], ["--top_k", "3"], ["extra"], ["--prompt"]]))
    return st.tuples(pairs, unknown).map(lambda t: [arg for pair in t[0] for arg in pair] + t[1])


def generate_flags() -> st.SearchStrategy[list[str]]:
    """--compile is left out: compiling a decode step takes tens of seconds (tests/test_generation.py runs it);
    so are huge token and sample counts, which are real work rather than mistakes."""
    where = mostly(st.sampled_from(["{case}/view.html", "{case}/map.png"]),
                   st.sampled_from(["{case}/missing/view.html", "{case}", "{case}/map.xyz"]))
    return st.tuples(mostly(st.sampled_from(["{text}", "{text_run}", "{calc}"]), PATHS), flags({
        "--prompt": mostly(st.text("ab c\n", max_size=12) | st.sampled_from(["two plus three", "seven times"]),
                           ODD_TEXT | st.sampled_from(["Two", "é", "a" * 40])),
        "--max-new-tokens": ints(0, 10).filter(lambda v: len(v) < 20 or v.startswith("-")),
        "--temperature": floats(0, 2), "--top-k": ints(1, 10), "--top-p": floats(0.01, 1),
        "--num-samples": mostly(st.integers(1, 3).map(str), st.sampled_from(["0", "-1", "x", "", "1.5", str(-10**30)])),
        "--seed": ints(0, 10**6),
        "--device": mostly(st.just("cpu"),
                           st.sampled_from(["cuda", "cuda:1", "mps", "meta", "xla", "", "gpu", "🙂"])),
        "--attention-map": where, "--attention-html": where,
    })).map(lambda t: ["--ckpt", t[0], *t[1]])


@given(argv=generate_flags())
@example(argv=["--ckpt", "{text}", "--temperature", "nan"])  # nan probabilities reached torch.multinomial
@example(argv=["--ckpt", "{text}", "--temperature", "1e-300"])  # every logit divided by it was inf
@example(argv=["--ckpt", "{text}", "--device", "meta"])  # a device torch names but cannot run on
@example(argv=["--ckpt", "{text}", "--seed", str(2**70)])  # "Overflow when unpacking long long", naming no flag
@example(argv=["--ckpt", "{text}", "--max-new-tokens", "x"])  # argparse's usage block, not one line
@settings(max_examples=scaled(100))
def test_any_generate_command_line_runs_or_is_one_line(files: Path, argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as case:
        argv = resolved(argv, files, case)
        assert_clean(call("generate.py", lambda: generate.main(argv)), argv)


def verb_arguments() -> st.SearchStrategy[list[str]]:
    model = mostly(st.sampled_from(["{text}", "{calc}"]), PATHS).map(lambda m: ["--ckpt", m])
    out = mostly(st.just("{case}/out"), st.sampled_from(["{case}", "{play}", "{missing}/deeper"]))
    verbs = {
        "prepare": st.tuples(mostly(st.sampled_from([["{play}"], ["{jsonl}"]]), st.lists(PATHS, max_size=2)), flags({
            "--tokenizer": mostly(st.sampled_from(["char", "word", "gpt2"]),
                                  st.sampled_from(["bpe", "unigram", "", "{empty}", "{calc}"])),
            "--vocab-size": ints(260, 400).filter(lambda v: len(v) < 8), "--val-fraction": floats(0.05, 0.5),
            "--val": mostly(st.just("{jsonl}"), PATHS), "--text-field": mostly(st.just("text"), ODD_TEXT),
            "--doc-bytes": ints(16, 4096), "--shard-tokens": ints(100, 10**6),
            "--num-proc": st.sampled_from(["1", "0", "-1", "2", "x"]), "--root": out, "--out": out})),
        "evaluate": st.tuples(model, flags({
            "--split": mostly(st.sampled_from(["val", "test"]), st.sampled_from(["train", ""])),
            "--seed": ints(0, 0), "--device": mostly(st.just("cpu"), st.sampled_from(["cuda", "meta", "x"]))})),
        "export": st.tuples(model, flags({"--to": out})),
        "report": st.tuples(st.lists(PATHS | out, max_size=2), st.just([])),
        "which-split": st.tuples(st.lists(mostly(st.sampled_from(["two plus three", "ninety nine times nine"]),
                                                 ODD_TEXT), max_size=2), flags({"--seed": ints(0, 5)})),
    }
    named = st.sampled_from(sorted(verbs)).flatmap(lambda v: verbs[v].map(lambda t: [v, *t[0], *t[1]]))
    return mostly(named, st.lists(ODD_TEXT, max_size=2))  # else no verb, or one that is not a verb


@given(argv=verb_arguments())
@example(argv=["prepare", "{play}", "--root", "{play}"])  # NotADirectoryError: a file where the shards' folder goes
@example(argv=["prepare", "{play}", "--doc-bytes", str(10**30)])  # OverflowError deep in the text reader
@example(argv=["prepare", "{text}"])  # a binary file: refused as not text
@settings(max_examples=scaled(100))
def test_any_front_door_command_line_runs_or_is_one_line(files: Path, argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as case:
        argv = resolved(argv, files, case)
        assert_clean(call("python -m gpt", lambda: cli(argv)), argv)
