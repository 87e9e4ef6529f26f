"""trainer=ddp on CPU: two gloo processes (ddp_spawn) train the same model on a sharded text corpus as one
process accumulating two batches per step, because each rank reads its own share of the one seeded batch stream
(and the spawned ranks map the shards again rather than receive copies)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from gpt import load_checkpoint
from gpt.data.corpus import TextData
from tests.conftest import play, run_cli

TINY = ["trainer=debug", "trainer.max_steps=6", "trainer.val_check_interval=100", "model.layers=1", "model.dim=32",
        "model.heads=2", "data=text", "data.path=corpus.txt", "data.doc_bytes=256", "data.shard_tokens=20000",
        "data.num_proc=1", "data.batch_size=16", "data.val_windows=256", "optim=adamw", "optim.warmup_steps=2",
        "logger=none", "trainer.precision=32-true"]  # trainer=ddp's is auto; fp32 AdamW compares the two to 1e-4


def val_loss(path: Path, folder: Path) -> float:
    """The loss of a model.pt on the corpus's 256 validation windows, computed the same way for both."""
    model, _ = load_checkpoint(path)
    data = TextData(block_size=model.cfg.block_size, path=str(folder / "corpus.txt"), root=str(folder / "data"),
                    doc_bytes=256, shard_tokens=20000, num_proc=1, val_windows=256)
    data.setup()
    inputs, targets = data.val_set
    with torch.no_grad():
        return F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten(), ignore_index=-100).item()


def test_ddp_on_two_cpu_processes_matches_one_process_over_the_same_global_batch(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_text(play(2000))
    ddp = run_cli("train.py", *TINY, "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
                  "hydra.run.dir=ddp", cwd=tmp_path)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    # Our own lines once, none of Lightning's start-up notes and deprecations from the two rank processes (a single
    # run shows none); that two processes ran is in summary.json's tokens/s below.
    shown = ddp.stdout + ddp.stderr
    for noise in ("Initializing distributed", "distributed_backend=", "LeafSpec", "`Trainer.fit` stopped"):
        assert noise not in shown, shown[-3000:]
    assert ddp.stdout.count("done in ") == 1, ddp.stdout
    single = run_cli("train.py", *TINY, "trainer.accumulate_grad_batches=2", "hydra.run.dir=single", cwd=tmp_path)
    assert single.returncode == 0, single.stderr[-3000:]
    ddp_loss, single_loss = (val_loss(tmp_path / run / "model.pt", tmp_path) for run in ("ddp", "single"))
    print(f"val loss after 6 steps: ddp {ddp_loss!r}  single {single_loss!r}  diff {abs(ddp_loss - single_loss):.2e}")
    # Same gradients in exact arithmetic (every window has block_size tokens); all-reduce sums in
    # another order, so the weights differ in the last bits after a few Adam steps.
    assert abs(ddp_loss - single_loss) < 1e-4 * single_loss
    # Both train 2 x 16 windows a step; summary.json's tokens/s counted the windows of rank 0 alone, so the two
    # processes looked half as fast as they were.
    block_size = load_checkpoint(tmp_path / "ddp/model.pt")[0].cfg.block_size
    for run in ("ddp", "single"):
        summary = json.loads((tmp_path / run / "summary.json").read_text())
        assert summary["tokens_per_s"] * summary["ms_per_step"] / 1000 == pytest.approx(2 * 16 * block_size)
