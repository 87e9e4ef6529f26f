"""bench/gpu_train.py measures the variant it is given at GPT-2-small's shape: train.py takes every one."""
from __future__ import annotations

import sys

import pytest

from gpt.training.checks import check_config
from tests.conftest import ROOT
from tests.test_configs import compose_with

sys.path.insert(0, str(ROOT / "bench"))
import gpu_train  # noqa: E402


@pytest.mark.parametrize("attention", ["mha", "linear", "torch_mha", "single_head"])
def test_the_shape_is_not_refused_under_a_variant_that_ignores_part_of_it(attention: str) -> None:
    """model.kernel=sdpa and model.heads=12 were refused under attention=linear and single_head, which read neither,
    so `python bench/gpu_train.py model.attention=linear` measured nothing."""
    overrides = [*gpu_train.SHAPE, f"model.attention={attention}"]
    check_config(compose_with(*overrides), overrides)


@pytest.mark.parametrize("argv", [["--steps", "10"], ["--steps", "50", "--warmup", "50"], ["--batch", "0"]])
def test_nothing_left_to_measure_is_refused_before_training(argv: list[str]) -> None:
    """--steps 10 (under the default --warmup 50) trained GPT-2-small on the GPU for the whole run, then ended in
    'StatisticsError: no median for empty data'."""
    with pytest.raises(SystemExit):
        gpu_train.parse_args(argv)


def test_without_cuda_it_says_so_in_one_line_naming_the_cpu_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    """It said 'bench/gpu_train.py needs CUDA', naming neither what it does nor what to run on a CPU."""
    monkeypatch.setattr(gpu_train.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"^error: bench/gpu_train.py times training on a GPU, and torch sees no CUDA "
                                         r"device here: .+ \(bench/train_speed.py times the CPU\)$"):
        gpu_train.main([])
