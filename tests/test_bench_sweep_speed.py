"""bench/sweep_speed.py compares the two sweeps it ran: their folders are where it reads the matrices from."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import sweep_speed  # noqa: E402


def test_a_relative_out_compares_the_sweeps_it_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out sw ran each sweep into sw/sw/<name> (hydra.sweep.dir taken from the sweep's own working folder) and
    compared the empty sw/<name>: '0 of 0 cells differ', as if the matrices agreed."""
    def sweep(command: list[str], env: dict, cwd: Path, **kwargs: object) -> subprocess.CompletedProcess:
        folder = next(a.split("=", 1)[1] for a in command if a.startswith("hydra.sweep.dir="))
        (Path(cwd) / folder).mkdir(parents=True)  # where Hydra writes it
        return subprocess.CompletedProcess(command, 0, "", "")

    compared = []
    monkeypatch.setattr(sweep_speed.subprocess, "run", sweep)
    monkeypatch.setattr(sweep_speed, "disagreements", lambda a, b: compared.extend([a, b]) or ([], 1, 0.0))
    monkeypatch.chdir(tmp_path)
    sweep_speed.main(["--out", "sw"])
    assert compared and all(folder.is_dir() for folder in compared)
    assert sorted(p.name for p in (tmp_path / "sw").iterdir()) == ["parallel", "serial"]
