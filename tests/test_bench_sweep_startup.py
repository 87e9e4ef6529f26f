"""bench/sweep_startup.py refuses what it cannot measure in one line, before any sweep runs."""
from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import sweep_startup  # noqa: E402


@pytest.mark.parametrize("argv", [["--jobs", "1"], ["--repeats", "0"]])
def test_nothing_to_measure_is_refused(argv: list[str]) -> None:
    """--jobs 1 ran every sweep and then ended in ZeroDivisionError (a job after the first is what it measures);
    --repeats 0 in 'StatisticsError: no median for empty data'."""
    with pytest.raises(SystemExit):
        sweep_startup.parse_args(argv)
