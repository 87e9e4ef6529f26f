"""bench/sweep_speed.py compares the two sweeps it ran: their folders are where it reads the matrices from."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpt.sweeps import capability
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
    monkeypatch.setattr(sweep_speed, "disagreements", lambda a, b: compared.extend([a, b]) or ([], 1, 0, 0.0))
    monkeypatch.chdir(tmp_path)
    sweep_speed.main(["--out", "sw"])
    assert compared and all(folder.is_dir() for folder in compared)
    assert sorted(p.name for p in (tmp_path / "sw").iterdir()) == ["parallel", "serial"]


def matrices(monkeypatch: pytest.MonkeyPatch, seeds: dict[str, list[float]]) -> tuple[list[str], int, int, float]:
    """disagreements() between two sweeps whose configurations got these accuracies (one per seed) in one column."""
    runs = {label: [{"status": "ok", capability.EXACT: {"copy": v / 100}} for v in values]
            for label, values in seeds.items()}
    monkeypatch.setattr(sweep_speed, "find_runs", lambda folder: folder)
    monkeypatch.setattr(sweep_speed, "summaries", lambda folder: runs)
    return sweep_speed.disagreements(Path("serial"), Path("parallel"))


def test_one_seed_per_cell_compares_no_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """seed=0 printed '0 of 10 cells differ beyond seed noise', though beyond_noise() makes no claim on one seed."""
    line = sweep_speed.verdict(*matrices(monkeypatch, {"attention=mha": [50.0], "attention=gqa": [60.0]}))
    assert "no cell could be compared (one seed each: give seed=0,1,2 or more to compare)" in line
    assert "0 of" not in line


def test_only_cells_with_seeds_to_compare_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    line = sweep_speed.verdict(*matrices(monkeypatch, {"attention=mha": [50.0, 52.0], "attention=gqa": [60.0]}))
    assert "0 of 1 cells compared differ beyond seed noise; 1 has one seed" in line
