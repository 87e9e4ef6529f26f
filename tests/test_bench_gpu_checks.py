"""bench/gpu_checks.sh on a machine without a GPU says so and stops, rather than run every check to its failure."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine runs the checks")
def test_without_a_gpu_it_refuses_in_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    """On a CPU it ran each step to its own failure for a minute, trained trainer=ddp on the CPU, and exited 0."""
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    result = subprocess.run(["bash", str(ROOT / "bench" / "gpu_checks.sh")], env=env, capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == "bench/gpu_checks.sh needs a CUDA GPU and torch sees none here: run it on a GPU machine\n"
    assert "== " not in result.stdout  # no step ran
