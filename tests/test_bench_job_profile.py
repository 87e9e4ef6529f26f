"""bench/job_profile.py profiles the job it is given: that job's model, data and optimizer, in the precision
train.py would train it in, and its step trains."""
from __future__ import annotations

import sys

import pytest
import torch

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import job_profile  # noqa: E402

SMALL = ["data.train_lines=256", "data.val_lines=16"]


@pytest.mark.parametrize("precision, trains_in", [("32", "32"), ("bf16-mixed", "bf16-mixed")])
def test_the_profiled_step_is_the_named_jobs_and_it_learns(precision: str, trains_in: str) -> None:
    torch.manual_seed(0)
    step, chosen, job = job_profile.job_step("attention_tasks", ["attention=gqa", f"trainer.precision={precision}",
                                                                 *SMALL])
    assert chosen == trains_in and "attention=gqa" in job
    losses = [float(step()) for _ in range(40)]
    assert all(map(torch.isfinite, torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5


def test_without_overrides_it_profiles_the_presets_mha_job() -> None:
    assert job_profile.job_step("attention_tasks", [])[2] == "experiment=attention_tasks attention=mha"


def test_a_precision_a_cpu_job_cannot_train_in_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="trainer.precision=16-mixed: a CPU job trains in 32 or bf16-mixed"):
        job_profile.job_step("attention_tasks", ["trainer.precision=16-mixed", *SMALL])


def test_an_unknown_option_is_one_line_naming_the_options() -> None:
    with pytest.raises(ValueError, match=r"^attention=nope is not an option of attention: choose one of gqa, "):
        job_profile.job_step("attention_tasks", ["attention=nope", *SMALL])


def test_a_sweep_of_values_is_one_line_saying_it_profiles_one_job() -> None:
    """Hydra's 'Ambiguous value for argument' named no way on."""
    with pytest.raises(ValueError, match=r"^attention=mqa,gqa is a sweep, and this profiles one job: give one value"):
        job_profile.job_step("attention_tasks", ["attention=mqa,gqa", *SMALL])
