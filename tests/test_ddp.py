"""trainer=ddp on CPU: two gloo processes (ddp_spawn) train the same model on a sharded text corpus as one
process accumulating two batches per step, because each rank reads its own share of the one seeded batch stream
(and the spawned ranks map the shards again rather than receive copies). Ctrl-C and SIGTERM stop such a run as they
stop a single process."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from gpt import load_checkpoint
from gpt.data.corpus import TextData
from gpt.training.checkpoint_io import load_resume_checkpoint
from tests.conftest import ROOT, child_env, play, run_cli

DDP = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]
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
    ddp = run_cli("train.py", *TINY, *DDP, "hydra.run.dir=ddp", cwd=tmp_path)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    # Our own lines once, none of Lightning's start-up notes and deprecations from the two rank processes (a single
    # run shows none); that two processes ran is in summary.json's tokens/s below.
    shown = ddp.stdout + ddp.stderr
    for noise in ("Initializing distributed", "distributed_backend=", "LeafSpec", "`Trainer.fit` stopped"):
        assert noise not in shown, shown[-3000:]
    assert ddp.stdout.count("done in ") == 1, ddp.stdout
    assert "no data parallelism" not in ddp.stdout  # the note of a one-device ddp run (test below) is not said here
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


@pytest.mark.parametrize("signum, name", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_to_a_ddp_run_stops_it_as_it_stops_a_single_run(tmp_path: Path, signum: int, name: str) -> None:
    """The process that starts the ranks trains none and had no Ctrl-C handler: the ranks stopped and saved last.ckpt,
    but it ended with exit status 1, no model.pt and no word of how to go on. SIGTERM (kill <pid>, a container's stop,
    timeout) reaches that process alone: it ended at once, and the ranks, told by torch with a SIGINT, recorded a stop
    by Ctrl-C and left no model.pt."""
    (tmp_path / "corpus.txt").write_text(play(2000))
    run = tmp_path / "ddp"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *TINY, *DDP, "trainer.max_steps=100000",
                             "callbacks.checkpoint.every_n_steps=5", "hydra.run.dir=ddp"], cwd=tmp_path,
                            start_new_session=True, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while not (run / "checkpoints/last.ckpt").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)  # a terminal's Ctrl-C reaches every process of its foreground group
        else:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
        ranks_left = subprocess.run(["pgrep", "-g", str(proc.pid), "-f", "spawn_main"], capture_output=True,
                                    text=True).stdout.split()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signum, err[-3000:]
    assert ranks_left == []
    checkpoint = load_resume_checkpoint(run / "checkpoints/last.ckpt")
    step = checkpoint["global_step"]
    assert 5 <= step < 100000
    assert f"stopped by {name} at step {step}; continue with the same overrides plus ckpt_path=" in err
    assert "stopped after " in out and f"step {step}" in out and "done in" not in out
    assert json.loads((run / "summary.json").read_text())["reason"] == f"stopped by {name} at step {step}"
    model, _ = load_checkpoint(run / "model.pt")  # the weights the ranks stopped with
    for name, weight in model.state_dict().items():
        assert torch.equal(weight, checkpoint["state_dict"][f"model.{name}"]), name


def test_ddp_with_one_device_says_it_trains_one_process(tmp_path: Path) -> None:
    """trainer=ddp on a machine without a GPU found one device (accelerator auto: the CPU) and trained one process
    without a word, where the docs promise every GPU of the machine. That a two-process run says no such thing is
    checked on the first test's run."""
    (tmp_path / "corpus.txt").write_text(play(2000))
    run = run_cli("train.py", *TINY, "trainer=ddp", "hydra.run.dir=one", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "note: trainer.strategy=ddp_spawn has one device here (cpu), so one process trains, with no data " \
        "parallelism; on a CPU, trainer.accelerator=cpu trainer.devices=2 trains two" in run.stdout, run.stdout
