"""generate.py and the verbs into a reader that stops early (`| head`): the text so far, then a quiet end."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpt import ModelConfig
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer
from gpt.data.tokenizers.vocab import CharTokenizer
from gpt.inference.checkpoint import save_model
from gpt.pipe import exit_with
from tests.conftest import ROOT, build, child_env
from tests.test_report import fake_run


def test_a_closed_stdout_ends_generation_without_a_traceback(tmp_path: Path) -> None:
    """print() into the closed pipe raised BrokenPipeError: a traceback, where `| head` users expect nothing."""
    tokenizer = CharTokenizer(list("ab \n"))
    save_model(tmp_path / "model.pt", build(ModelConfig(vocab_size=4, layers=1, heads=2, dim=16, block_size=8)),
               tokenizer)
    proc = subprocess.Popen([sys.executable, str(ROOT / "generate.py"), "--ckpt", str(tmp_path / "model.pt"),
                             "--max-new-tokens", "50"], cwd=tmp_path, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # before anything is printed, so the first print meets a closed pipe
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_closed_stdout_ends_a_verb_without_a_traceback(tmp_path: Path) -> None:
    """`python -m gpt report <sweep> | head` ended in a BrokenPipeError traceback."""
    fake_run(tmp_path / "0", ["seed=0"], {"status": "failed", "reason": "why"})
    proc = subprocess.Popen([sys.executable, "-m", "gpt", "report", str(tmp_path)], cwd=tmp_path,
                            env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_ctrl_c_ends_a_command_in_one_line(capsys: pytest.CaptureFixture) -> None:
    """Ctrl-C during `python -m gpt prepare` (minutes on a large corpus) printed a KeyboardInterrupt traceback."""
    def interrupted() -> int:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exit_:
        exit_with(interrupted)
    assert exit_.value.code == 130 and capsys.readouterr().err == "interrupted\n"


def test_a_prompt_past_the_block_is_said_to_be_cut(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The model sees only the prompt's last block_size tokens: generate.py printed the whole prompt and went on as if
    it had answered all of it."""
    import generate

    tokenizer = CharTokenizer(list("ab \n"))
    save_model(tmp_path / "model.pt", build(ModelConfig(vocab_size=4, layers=1, heads=2, dim=16, block_size=8)),
               tokenizer)
    assert generate.main(["--ckpt", str(tmp_path), "--prompt", "ab ab ab ab", "--max-new-tokens", "2"]) == 0
    assert capsys.readouterr().err.splitlines()[1] == "note: the prompt is 11 tokens, past block_size=8: the model " \
        "sees its last 8"
    assert generate.main(["--ckpt", str(tmp_path), "--prompt", "ab ab", "--max-new-tokens", "2"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_a_prompt_ending_where_a_word_would_join_it_is_noted_once(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """'Once upon a ' encodes with a lone ' ' where text has ' time': generate.py went on from it without a word."""
    import generate

    full = GPT2Tokenizer()
    tokenizer = full.compact(full.encode("Once upon a time "))
    save_model(tmp_path / "model.pt", build(ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=1, dim=8,
                                                        block_size=16)), tokenizer)
    args = ["--ckpt", str(tmp_path), "--max-new-tokens", "2", "--temperature", "1", "--num-samples", "2"]
    assert generate.main([*args, "--prompt", "Once upon a "]) == 0
    assert capsys.readouterr().err.splitlines()[1:] == [
        "note: the prompt ends in ' ', which its tokenizer encodes otherwise where a word follows, as in the text the "
        "model learned: the continuation may be off; drop the trailing whitespace"]
    assert generate.main([*args, "--prompt", "Once upon a"]) == 0
    assert "note:" not in capsys.readouterr().err
