"""bench/step_profile.py refuses what it cannot profile in one line, before building either model."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import step_profile  # noqa: E402


def test_a_folder_that_is_not_nanogpt_is_refused_in_one_line(tmp_path: Path) -> None:
    """--nanogpt naming no checkout ended in a FileNotFoundError traceback for its model.py."""
    (tmp_path / "input.txt").write_text("to be or not to be")
    with pytest.raises(SystemExit, match="is not a nanoGPT checkout"):
        step_profile.main(["--nanogpt", str(tmp_path / "nope"), "--corpus", str(tmp_path / "input.txt")])


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--rounds", "0"]])
def test_nothing_to_time_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        step_profile.parse_args(["--nanogpt", "nope", "--corpus", "input.txt", *argv])
