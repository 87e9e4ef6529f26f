"""bench/generate_speed.py refuses what it cannot time in one line, before any model is built."""
from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import generate_speed  # noqa: E402


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--new-tokens", "0"], ["--batch", "1", "0"],
                                  ["--prompt-len", "0"]])
def test_nothing_to_time_is_refused(argv: list[str]) -> None:
    """--repeats 0 warmed every row up, then ended in 'StatisticsError: no median for empty data'; --new-tokens 0
    in a ZeroDivisionError."""
    with pytest.raises(SystemExit):
        generate_speed.parse_args(argv)


def test_compiled_all_is_refused_not_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """'all' is --uncached's word: --compiled all was let through and timed no compiled row, with nothing said."""
    monkeypatch.setattr(generate_speed, "tinygpt_runner", lambda *args: pytest.fail("built a model"))
    with pytest.raises(SystemExit, match="--compiled/--uncached all not among --attention"):
        generate_speed.main(["--attention", "mha", "--compiled", "all", "--no-hf"])


@pytest.mark.parametrize("argv, message", [
    (["--pos", "rope"], "attention=torch_mha projects queries/keys inside torch, where pos=rope cannot rotate"),
    (["--attention", "linear", "--pos", "alibi"], "pos=alibi biases attention scores, which attention=linear never"),
    (["--heads", "3"], "heads=3 does not divide dim=128"),
])
def test_a_model_it_cannot_build_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    """--pos rope, with every variant as by default, ended in a ValueError traceback from torch_mha, which refuses
    RoPE; so did a shape no model has (--heads 3 of 128 dims)."""
    with pytest.raises(SystemExit):
        generate_speed.parse_args(argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert ": error: " in last and message in last
