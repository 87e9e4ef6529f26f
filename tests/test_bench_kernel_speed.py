"""bench/kernel_speed.py refuses what it cannot time in one line, before any step."""
from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import kernel_speed  # noqa: E402


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--rounds", "0"]])
def test_nothing_to_time_is_refused(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Either ended in 'StatisticsError: no median for empty data'."""
    monkeypatch.setattr(sys, "argv", ["kernel_speed.py", "--shapes", "calculator", *argv])
    monkeypatch.setattr(kernel_speed, "step_ms", lambda *args: pytest.fail("timed a step"))
    with pytest.raises(SystemExit):
        kernel_speed.main()
