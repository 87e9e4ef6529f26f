"""bench/generate_speed.py refuses what it cannot time in one line, before any model is built, and says on stderr
what it is timing."""
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


def test_each_row_and_round_says_on_stderr_that_it_starts(capsys: pytest.CaptureFixture) -> None:
    """At its defaults the bench printed nothing for minutes after its header: every row's warm-up and every timed
    round ran silently. The tables stay alone on stdout."""
    generate_speed.main(["--attention", "mha", "gqa", "--batch", "1", "2", "--new-tokens", "2", "--repeats", "2",
                         "--no-hf", "--compiled", "--uncached", "--layers", "1", "--heads", "2", "--dim", "16",
                         "--block-size", "4"])
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "warming up mha, batch 1 (1 of 4)...", "warming up gqa, batch 1 (2 of 4)...",
        "timing batch 1, round 1 of 2 (2 rows)...", "timing batch 1, round 2 of 2 (2 rows)...",
        "warming up mha, batch 2 (3 of 4)...", "warming up gqa, batch 2 (4 of 4)...",
        "timing batch 2, round 1 of 2 (2 rows)...", "timing batch 2, round 2 of 2 (2 rows)...",
    ]
    rows = [line.split()[:2] for line in out.splitlines() if line.startswith(("mha ", "gqa "))]
    assert rows == [["mha", "yes"], ["gqa", "yes"]] * 2 and "..." not in out
