"""trainer=ddp on CPU: two gloo processes (ddp_spawn) train the same model as one process accumulating
two batches per step, because each rank reads its own share of the one seeded batch stream."""
from __future__ import annotations

from pathlib import Path

import torch
from torch.nn import functional as F

from gpt import load_checkpoint
from gpt.data import CalculatorData
from tests.conftest import run_cli

TINY = ["trainer=debug", "trainer.max_steps=6", "trainer.val_check_interval=100", "model.layers=1", "model.dim=32",
        "model.heads=2", "data.batch_size=16", "optim=adamw", "optim.warmup_steps=2", "logger=none",
        "trainer.precision=32-true"]  # trainer=ddp's own precision is auto; fp32 AdamW keeps the two comparable to 1e-4


def val_loss(path: Path) -> float:
    """The loss of a model.pt on the first 256 calculator validation rows, computed the same way for both."""
    model, _ = load_checkpoint(path)
    data = CalculatorData(batch_size=16)
    data.setup()
    inputs, targets = data.val_set[0][:256], data.val_set[1][:256]
    with torch.no_grad():
        return F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten(), ignore_index=-100).item()


def test_ddp_on_two_cpu_processes_matches_one_process_over_the_same_global_batch(tmp_path: Path) -> None:
    ddp = run_cli("train.py", *TINY, "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
                  "hydra.run.dir=ddp", cwd=tmp_path)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert "MEMBER: 2/2" in ddp.stdout + ddp.stderr  # two processes really ran
    single = run_cli("train.py", *TINY, "trainer.accumulate_grad_batches=2", "hydra.run.dir=single", cwd=tmp_path)
    assert single.returncode == 0, single.stderr[-3000:]
    ddp_loss, single_loss = val_loss(tmp_path / "ddp/model.pt"), val_loss(tmp_path / "single/model.pt")
    print(f"val loss after 6 steps: ddp {ddp_loss!r}  single {single_loss!r}  diff {abs(ddp_loss - single_loss):.2e}")
    # Same gradients in exact arithmetic (every rank's rows have equal token counts); all-reduce sums in
    # another order, so the weights differ in the last bits after a few Adam steps.
    assert abs(ddp_loss - single_loss) < 1e-4 * single_loss
