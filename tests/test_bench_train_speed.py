"""bench/train_speed.py refuses what it cannot measure in one line, before any timing."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import train_speed  # noqa: E402


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--rounds", "0"], ["--batch", "0"], ["--warmup", "-1"]])
def test_nothing_to_measure_is_refused(argv: list[str]) -> None:
    """--steps 0 or --rounds 0 ran every loop, then ended in 'StatisticsError: no median for empty data'."""
    with pytest.raises(SystemExit):
        train_speed.parse_args(argv)


def test_a_missing_corpus_is_one_line() -> None:
    """It ended in a FileNotFoundError traceback."""
    with pytest.raises(SystemExit, match=r"^error: --corpus no_such_file.txt: no such file$"):
        train_speed.main(["--corpus", "no_such_file.txt"])


@pytest.mark.parametrize("text, refusal", [("", r"is empty: give a text to train on$"),
                                           ("hello world", r"holds 11 characters, and a window of context \d+ needs "
                                                           "more: give a longer corpus$")])
def test_a_corpus_too_short_for_a_window_is_one_line(tmp_path: Path, text: str, refusal: str) -> None:
    """A short corpus ended in torch's 'random_ expects from to be less than to', an empty one named vocab_size=0."""
    (tmp_path / "input.txt").write_text(text)
    with pytest.raises(SystemExit, match=rf"^error: --corpus {tmp_path / 'input.txt'} {refusal}"):
        train_speed.main(["--corpus", str(tmp_path / "input.txt")])


def test_an_unknown_model_field_is_one_line_naming_the_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_speed, "matmul_peak", lambda n: pytest.fail("measured before the model was checked"))
    with pytest.raises(SystemExit, match=r"^error: unknown model field\(s\) \['foo'\]; known fields: attention, "):
        train_speed.main(["foo=1"])


def test_parts_that_do_not_suit_each_other_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """attention=torch_mha pos=rope passed the config's own checks and ended in a ValueError traceback when the
    first loop built the model, after the matmul peak had been measured."""
    monkeypatch.setattr(train_speed, "matmul_peak", lambda n: pytest.fail("measured before the model was checked"))
    with pytest.raises(SystemExit, match=r"^error: attention=torch_mha projects queries/keys inside torch, where "
                                         r"pos=rope cannot rotate them"):
        train_speed.main(["attention=torch_mha", "pos=rope"])
