"""Resume is exact and crash-safe: a run on a sharded text corpus killed with SIGKILL and resumed logs the same
loss at every step as an uninterrupted run; a kill during a checkpoint write leaves the previous checkpoint loadable;
a resume checkpoint whose pickle would run code is refused; a non-finite loss stops naming the last
good checkpoint; Ctrl-C stops cleanly with last.ckpt and model.pt written."""
from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader

from gpt import ModelConfig, load_checkpoint
from gpt.__main__ import main as cli
from gpt.inference.checkpoint import CheckpointError
from gpt.sweeps.lock import SWEEP_LOCK
from gpt.sweeps.parallel import GRACE_S
from gpt.training.callbacks import ResumeCheckpoint, SampleText, TrainingStopped
from gpt.training.interrupts import StopOnInterrupt
from gpt.training.checks import check_config
from gpt.training.lit import OPTIM_NAME, LitGPT
from gpt.training.optim import OPTIMIZERS, SCHEDULES, OptimConfig
from gpt.training.preflight import preflight
from gpt.training.checkpoint_io import AtomicCheckpointIO, load_resume_checkpoint
from gpt.training.resume import find_resume_checkpoint, resume_from
from gpt.training.run_folder import kept_on_resume, read_history, read_summary, record_stop, write_summary
from gpt.training.run_folder_lock import locked, release
from gpt.training.run_record import finished_line
from tests.conftest import (ROOT, TINY_RUN, CodeRunningPickle, child_env, files_in, flip_a_bit_in, once_per_session,
                            play, run_cli)
from tests.fuzzing import fresh_folder, job
from tests.test_configs import compose_with
from tests.test_data import TINY, train_in_process
from train import CONFIGS

# Dropout on, so the restored RNG matters; a checkpoint every 10 steps; the loss logged at every step.
RUN = ["model.layers=1", "model.dim=32", "model.heads=2", "model.dropout=0.1", "data.batch_size=16",
       "data.eval_lines=10", "trainer=debug", "trainer.max_steps=40", "trainer.val_check_interval=20",
       "trainer.log_every_n_steps=1", "callbacks.checkpoint.every_n_steps=10", "optim.warmup_steps=5"]


def losses(run_dir: Path) -> dict[int, str]:
    """step -> train/loss exactly as written (a float's repr), from Lightning's metrics.csv."""
    with open(run_dir / "csv/version_0/metrics.csv") as f:
        return {int(row["step"]): row["train/loss"] for row in csv.DictReader(f) if row.get("train/loss")}


# The same on a text corpus prepared into several shards, whose windows the resumed run must re-enter exactly;
# with Muon chained to AdamW, both optimizers' states must come back (tests/test_optim.py restores each alone).
# Validating every 10 steps, the checkpoint the kill leaves is one written after a validation, which the resumed
# run does not replay (as with the defaults, both every 200 steps).
TEXT_RUN = [*(arg for arg in RUN if not arg.startswith(("data.", "trainer.val_check_interval="))),
            "trainer.val_check_interval=10", "data=text", "data.path=corpus.txt",
            "data.doc_bytes=256", "data.shard_tokens=20000", "data.num_proc=1", "data.batch_size=16",
            "data.val_windows=32", "optim=muon"]


def test_killed_run_on_shards_resumes_with_identical_losses(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_text(play(2000))
    straight = run_cli("train.py", *TEXT_RUN, "hydra.run.dir=runs/straight", cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr[-2000:]
    killed_dir = tmp_path / "runs/killed"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *TEXT_RUN, "hydra.run.dir=runs/killed"],
                            cwd=tmp_path, env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (killed_dir / "checkpoints/last.ckpt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (killed_dir / "model.pt").exists(), "run ended before the kill"
    saved_step = load_resume_checkpoint(killed_dir / "checkpoints/last.ckpt")["global_step"]

    resumed = run_cli("train.py", *TEXT_RUN, "resume=true", "hydra.run.dir=runs/resumed", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    shown = resumed.stdout.replace(str(tmp_path) + "/", "")
    assert f"resuming from {Path('runs/killed/checkpoints/last.ckpt')}" in shown
    expected, got = losses(tmp_path / "runs/straight"), losses(tmp_path / "runs/resumed")
    assert sorted(got) == [s for s in sorted(expected) if s >= saved_step]
    assert {s: expected[s] for s in got} == got  # bitwise: the same float at every step
    assert len(list(tmp_path.glob("data/shards/*/train_*.bin"))) > 1


def test_resume_refuses_a_corpus_folder_prepared_again_since_the_checkpoint(tmp_path: Path) -> None:
    """A prepared folder deleted and prepared again with another --val-fraction (as a refusal advises), or from
    other text of the same size: a run resumed from a checkpoint trained on its new split, much of its validation
    text trained on, and reported that loss as held out; from text edited to as many tokens, it trained on text
    that was never its corpus. A checkpoint from before the record (or before its shards' digest) still resumes."""
    folder, text = tmp_path / "prepared", tmp_path / "play.txt"
    text.write_text(play())
    prepare = ["prepare", str(text), "--out", str(folder), "--doc-bytes", "256", "--num-proc", "1"]
    assert cli(prepare) == 0
    run = [*TINY, f"data.path={folder}", "trainer.val_check_interval=2"]
    ckpt = train_in_process(tmp_path / "run", *run, "trainer.max_steps=2").parent / "checkpoints/last.ckpt"
    resume = [*run, "trainer.max_steps=4", f"ckpt_path={ckpt}"]
    train_in_process(tmp_path / "same", *resume)  # the corpus it trained on: it goes on
    shutil.rmtree(folder)
    assert cli([*prepare, "--val-fraction", "0.5"]) == 0
    with pytest.raises(ValueError, match=rf"^{folder} is not the corpus {ckpt} trained on: it holds [\d,]+ training "
                                         r"and [\d,]+ validation tokens, that corpus [\d,]+ and [\d,]+ \(prepared "
                                         r"again since.*; resume on the text and data settings it trained on"):
        train_in_process(tmp_path / "split", *resume)
    shutil.rmtree(folder)
    text.write_text(play().replace("thou", "buds", 1))  # one word for another: as many tokens in each split
    assert cli(prepare) == 0
    with pytest.raises(ValueError, match=rf"^{folder} is not the corpus {ckpt} trained on: its shards hold other "
                                         r"ids than that corpus's \(prepared again since from edited text, or cut "
                                         r"into shards of another size\); resume on the text and data settings"):
        train_in_process(tmp_path / "edited", *resume)
    older = torch.load(ckpt, weights_only=True)
    del older["TextData"]["shards_sha256"]  # a record from before the shards' digest: checked as before
    torch.save(older, tmp_path / "older.ckpt")
    train_in_process(tmp_path / "older", *run, "trainer.max_steps=4", f"ckpt_path={tmp_path / 'older.ckpt'}")
    shutil.rmtree(folder)
    text.write_text(play().upper())  # as many tokens, and as many kinds of them, in another vocabulary
    assert cli(prepare) == 0
    with pytest.raises(ValueError, match=rf"^{folder} is not the corpus {ckpt} trained on: its tokenizer is another"):
        train_in_process(tmp_path / "vocabulary", *resume)
    old = torch.load(ckpt, weights_only=True)
    del old["TextData"]
    torch.save(old, tmp_path / "old.ckpt")
    train_in_process(tmp_path / "old", *run, "trainer.max_steps=4", f"ckpt_path={tmp_path / 'old.ckpt'}")


def test_resume_refuses_settings_that_split_the_calculators_problems_otherwise(tmp_path: Path) -> None:
    """data.seed shuffles the calculator's problems before the cut: a run resumed with another seed (or started
    from another's model.pt with init_from) trained on most of its new held-out problems and still reported them as
    held out. A sampled task splits by its text alone, so
    its resume with another seed goes on; a checkpoint from before the record resumes unchecked."""
    run = ["trainer=debug", "logger=none", "model.layers=1", "model.heads=2", "model.dim=32",
           "data.batch_size=16", "data.eval_lines=4", "trainer.val_check_interval=2"]
    ckpt = train_in_process(tmp_path / "run", *run, "trainer.max_steps=2").parent / "checkpoints/last.ckpt"
    resume = [*run, "trainer.max_steps=3", f"ckpt_path={ckpt}"]
    with pytest.raises(ValueError, match=rf"^{ckpt} trained on calculator's lines split otherwise: data.seed=1 where "
                                         r"it had 0, data.tasks.calculator.val_fraction=0.2 where it had 0.1 \(its "
                                         r"held-out lines would hold lines it trained on\); use data.seed=0 "
                                         r"data.tasks.calculator.val_fraction=0.1, or start afresh"):
        train_in_process(tmp_path / "seed", *resume, "data.seed=1", "data.tasks.calculator.val_fraction=0.2")
    train_in_process(tmp_path / "same", *resume)
    old = torch.load(ckpt, weights_only=True)
    del old["TaskData"]
    torch.save(old, tmp_path / "old.ckpt")
    train_in_process(tmp_path / "old", *run, "trainer.max_steps=3", f"ckpt_path={tmp_path / 'old.ckpt'}",
                     "data.seed=1")
    with pytest.raises(ValueError, match=rf"^init_from={ckpt.parent.parent} trained on calculator's lines split "
                                         r"otherwise: data.seed=1 where it had 0 \(.*\); use data.seed=0, or drop "
                                         r"init_from$"):
        train_in_process(tmp_path / "tuned", *run, "trainer.max_steps=2", f"init_from={ckpt.parent.parent}",
                         "data.seed=1")
    recall = ["data=recall", *[o for o in run if o != "data.eval_lines=4"], "data.train_lines=64", "data.val_lines=8"]
    first = train_in_process(tmp_path / "recall", *recall, "trainer.max_steps=2").parent / "checkpoints/last.ckpt"
    train_in_process(tmp_path / "recall_seed", *recall, "trainer.max_steps=3", f"ckpt_path={first}", "data.seed=1")


def test_resume_trains_at_the_optimizer_settings_it_is_given(tmp_path: Path) -> None:
    """A non-finite loss advises resuming with a lower optim.lr: the restored optimizer and schedule kept the
    checkpoint's peak LRs and weight decay, and the run went on exactly as before without a word."""
    (tmp_path / "play.txt").write_text(play())
    run = [*TINY, f"data.path={tmp_path / 'play.txt'}", "trainer.val_check_interval=2", "optim.warmup_steps=1"]
    first = train_in_process(tmp_path / "run", *run, "trainer.max_steps=2").parent
    lower = ["optim.lr=1e-4", "optim.min_lr=1e-5", "optim.muon_lr=2e-3", "optim.weight_decay=0.01"]
    resumed = train_in_process(tmp_path / "lower", *run, *lower, "trainer.max_steps=3",
                               f"ckpt_path={first / 'checkpoints/last.ckpt'}").parent
    state = torch.load(resumed / "checkpoints/last.ckpt", weights_only=True)
    assert state["lr_schedulers"][0]["base_lrs"] == [1e-4, 1e-4, 2e-3]
    groups = state["optimizer_states"][0]["param_groups"]
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0, 0.01]
    assert [g["lr"] for g in groups] == pytest.approx([1e-5, 1e-5, 2e-4])  # cosine at its end: min_lr / lr of each peak


def test_sigkill_during_checkpoint_write_keeps_previous(tmp_path: Path) -> None:
    path = tmp_path / "last.ckpt"
    script = f"""
import os, signal, torch
from gpt.training.checkpoint_io import AtomicCheckpointIO
io = AtomicCheckpointIO()
io.save_checkpoint({{"loops": {{}}, "optimizer_states": [], "step": 1}}, {str(path)!r})
def torn_save(obj, f):  # half a file written, then the process dies mid-write
    f.write(b"PK\\x03\\x04 half a checkpoint"); f.flush(); os.kill(os.getpid(), signal.SIGKILL)
torch.save = torn_save
io.save_checkpoint({{"loops": {{}}, "optimizer_states": [], "step": 2}}, {str(path)!r})
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob(".last.ckpt.*.tmp"))) == 1  # the torn write happened, beside the real file
    assert load_resume_checkpoint(path)["step"] == 1


def test_resume_checkpoint_with_code_in_its_pickle_is_refused(tmp_path: Path) -> None:
    """Loaded by Lightning's checkpoint IO, and by train.py's job in this process: refused in one line, no code run
    (train.py's own process answers a refusal inside its job so: tests/test_data.py's missing data.path)."""
    marker = tmp_path / "pwned"
    torch.save({"loops": {}, "optimizer_states": [], "evil": CodeRunningPickle(marker)}, tmp_path / "evil.ckpt")
    with pytest.raises(CheckpointError, match="refusing to unpickle"):
        AtomicCheckpointIO().load_checkpoint(tmp_path / "evil.ckpt")
    with fresh_folder() as folder:
        result = job([f"ckpt_path={tmp_path / 'evil.ckpt'}"], folder / "run", caps={})
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err.strip().splitlines()[-1].startswith("error: ") and "refusing to unpickle" in result.err
    assert not marker.exists()


def test_a_run_folder_as_ckpt_path_is_named_a_folder(tmp_path: Path) -> None:
    """It was refused as `does not exist`, of a folder the user could see."""
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(CheckpointError, match=rf"^ckpt_path={tmp_path} is a folder: pass the checkpoint in it "
                                              rf"\({tmp_path / 'checkpoints' / 'last.ckpt'} of a run folder\)"):
        load_resume_checkpoint(tmp_path)


def test_a_cut_short_ckpt_path_is_told_to_point_at_a_last_ckpt(tmp_path: Path) -> None:
    """Its advice was the one shared with model.pt: "a model.pt or .ckpt", and a model.pt cannot resume training."""
    (path := tmp_path / "last.ckpt").write_bytes(b"PK")
    for load in (load_resume_checkpoint, AtomicCheckpointIO().load_checkpoint):
        with pytest.raises(CheckpointError, match=rf"^{path} is not a readable torch file \(not written by torch.save, "
                                                  r"or cut short\): point at a checkpoints/last.ckpt that training "
                                                  r"wrote, or train it again$"):
            load(path)


@pytest.mark.parametrize("max_time, refused", [("00:00:00:05", True), ("{seconds:5}", True), ("00:00:00:09", False),
                                               ("null", False)])
def test_a_run_that_spent_its_max_time_is_refused_naming_a_larger_one(tmp_path: Path, max_time: str,
                                                                      refused: bool) -> None:
    """Lightning's Timer restores the training time a checkpoint's run spent: resumed with the trainer.max_time that
    stopped it, the run stopped again before its first step, with no history.csv, no summary.json and no word."""
    ckpt = tmp_path / "last.ckpt"
    torch.save({"global_step": 23, "loops": {}, "optimizer_states": [], "callbacks": {
        "Timer": {"time_elapsed": {"train": 6.7, "validate": 0.6}}}}, ckpt)
    cfg = compose_with("trainer.max_steps=100", f"trainer.max_time={max_time}", f"ckpt_path={ckpt}")
    if not refused:
        assert resume_from(cfg, tmp_path).step == 23
        return
    with pytest.raises(ValueError, match=rf"^{ckpt} has trained for 7 s, all of trainer.max_time \(which counts the "
                                         rf"time of the run it continues\); to train it further pass ckpt_path={ckpt} "
                                         r"and a larger trainer.max_time, or trainer.max_time=null$"):
        resume_from(cfg, tmp_path)


class PoisonAt(L.Callback):
    """Turn one weight into NaN before the batch of `step`, as a diverging run would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: object,
                             batch_idx: int) -> None:
        if trainer.global_step == self.step:
            with torch.no_grad():
                next(pl_module.parameters())[0, 0] = float("nan")


def test_non_finite_loss_stops_naming_the_step_and_last_good_checkpoint(tmp_path: Path,
                                                                        tiny_cfg: ModelConfig) -> None:
    generator = torch.Generator().manual_seed(0)
    data = [(torch.randint(0, 37, (2, 8), generator=generator),) * 2 for _ in range(10)]
    checkpoint = ResumeCheckpoint(tmp_path, every_n_steps=2)
    trainer = L.Trainer(accelerator="cpu", max_steps=10, callbacks=[checkpoint, PoisonAt(5)], logger=False,
                        plugins=[AtomicCheckpointIO()], enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(TrainingStopped, match=rf"^loss is nan at step 5; last good checkpoint: "
                                              rf"{tmp_path / 'last.ckpt'} \(step 4\)"):
        trainer.fit(LitGPT(tiny_cfg), train_dataloaders=DataLoader(data, batch_size=None))
    state = load_resume_checkpoint(tmp_path / "last.ckpt")
    with pytest.raises(TrainingStopped, match=r"^loss is nan at step 1; no checkpoint was written before it; start "
                                              r"again with a lower optim.lr \(and optim.muon_lr with optim=muon\)"):
        trainer = L.Trainer(accelerator="cpu", max_steps=10, callbacks=[ResumeCheckpoint(tmp_path / "none", 2),
                                                                        PoisonAt(1)],
                            logger=False, enable_progress_bar=False, enable_model_summary=False)
        trainer.fit(LitGPT(tiny_cfg), train_dataloaders=DataLoader(data, batch_size=None))
    assert state["global_step"] == 4 and all(torch.isfinite(v).all() for v in state["state_dict"].values())


@pytest.mark.parametrize("signum, name", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_stops_a_run_cleanly_with_checkpoint_and_model(tmp_path: Path, signum: int, name: str) -> None:
    """SIGTERM (kill <pid>, a container's stop, a scheduler's preemption, `timeout`) as Ctrl-C: Lightning's own SIGTERM
    handler ended the run at its next step with exit status 0, writing no model.pt and no summary.json, so
    `train.py && generate.py` went on and `resume=true` had no record that the run had stopped."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *RUN, "trainer.max_steps=100000",
                             "hydra.run.dir=run"], cwd=tmp_path, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (run / "checkpoints/last.ckpt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err[-2000:]  # so `train.py && generate.py` does not go on half-trained
    step = load_resume_checkpoint(run / "checkpoints/last.ckpt")["global_step"]
    assert err.splitlines()[-1].startswith(f"stopped by {name} at step {step}; continue with the same overrides "
                                           "plus ckpt_path=")
    assert "stopped after " in out and f"step {step}" in out and "done in" not in out  # it said done, then stopped
    assert read_summary(run) == {"status": "stopped", "reason": f"stopped by {name} at step {step}"}
    assert 10 <= step < 100000
    model, _ = load_checkpoint(run / "model.pt")
    assert model.cfg.dropout == 0.1


def train_patched(tmp_path: Path, patch: str, *overrides: str) -> subprocess.CompletedProcess:
    """train.py on RUN in `tmp_path`/run, in a child process that first runs `patch`: Python that replaces a hook of
    StopOnInterrupt (or torch.save) to send a signal at a chosen moment, so that it lands there rather than when a
    timer fires."""
    script = "\n".join(["import runpy, signal, sys, torch", "from gpt.training.interrupts import StopOnInterrupt",
                        patch, f"sys.argv = ['train.py', *{RUN!r}, *{list(overrides)!r}, 'hydra.run.dir=run']",
                        f"runpy.run_path({str(ROOT / 'train.py')!r}, run_name='__main__')"])
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("moment", ["gpt.training.lightning_checks.check_lightning_sections",  # importing Lightning
                                    "gpt.training.lit.LitGPT"])  # building the model, in the run's folder
def test_a_ctrl_c_before_training_is_one_line_and_leaves_no_run_folder(tmp_path: Path, moment: str) -> None:
    """Before training began a Ctrl-C was Python's traceback of fifty lines from wherever the run was (Lightning's
    import, a tokenizer's training on a real corpus, the model's build), and the run folder stayed, with nothing of
    the run's in it."""
    module, name = moment.rsplit(".", 1)
    proc = train_patched(tmp_path, f"""
import importlib, os
def ctrl_c(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
setattr(importlib.import_module({module!r}), {name!r}, ctrl_c)
""")
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr == "stopped by Ctrl-C before training began: nothing was trained or saved\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_at_the_last_step_leaves_a_finished_run(tmp_path: Path, signum: int) -> None:
    """A Ctrl-C that landed in the last step was taken as a stop: summary.json said stopped, with no numbers (the
    report showed the run as stopped), and the last line said to continue it with ckpt_path=, which was then refused
    as a run that has finished."""
    proc = train_patched(tmp_path, f"""
import os
stop_after = StopOnInterrupt.on_train_batch_end
def signal_in_the_last_step(self, trainer, *args):
    if trainer.global_step == trainer.max_steps:
        os.kill(os.getpid(), {int(signum)})
    stop_after(self, trainer, *args)
StopOnInterrupt.on_train_batch_end = signal_in_the_last_step
""")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_summary(tmp_path / "run")["status"] == "ok" and read_summary(tmp_path / "run")["steps"] == 40
    assert "done in " in proc.stdout and "stopped" not in proc.stdout + proc.stderr
    assert (tmp_path / "run/model.pt").is_file()


def test_a_second_ctrl_c_aborts_in_one_line_that_says_how_to_go_on(tmp_path: Path) -> None:
    """Lightning answers the KeyboardInterrupt of a second Ctrl-C with exit(1) and nothing said: the run's folder
    then held no record, and `train.py && generate.py` read it as an error, not a stop."""
    # The second Ctrl-C lands in the step after the first, before the stop can finish: raised there, not timed.
    proc = train_patched(tmp_path, """
def second_ctrl_c(self, trainer, *args):
    if trainer.global_step == 25:
        self.requested = True
        raise KeyboardInterrupt
StopOnInterrupt.on_train_batch_end = second_ctrl_c
""", "callbacks.checkpoint.every_n_steps=10")
    assert proc.returncode == 130, proc.stderr[-2000:]
    ckpt = tmp_path / "run/checkpoints/last.ckpt"
    assert proc.stderr.splitlines()[-1] == f"aborted by a second Ctrl-C at step 25, before model.pt was written; " \
        f"continue from {ckpt} with the same overrides plus ckpt_path={ckpt} (or resume=true)"
    assert load_resume_checkpoint(ckpt)["global_step"] == 20 and not (tmp_path / "run/model.pt").exists()


@pytest.mark.parametrize("stopped", [True, False], ids=["second Ctrl-C", "Ctrl-C after training"])
def test_a_ctrl_c_while_model_pt_is_written_aborts_in_one_line_leaving_no_part_of_it(tmp_path: Path,
                                                                                     stopped: bool) -> None:
    """A Ctrl-C once training had ended (the second after a stop, or the first after the last step) came as
    KeyboardInterrupt while model.pt was written: a traceback, not the stop's one line. It lands halfway through the
    write: sent there, not timed."""
    proc = train_patched(tmp_path, f"""
stop_at, save = StopOnInterrupt.on_train_batch_end, torch.save
def first_ctrl_c(self, trainer, *args):
    if {stopped} and trainer.global_step == 25:
        signal.raise_signal(signal.SIGINT)
    stop_at(self, trainer, *args)
def half_then_ctrl_c(obj, f, *args, **kwargs):
    if ".model.pt." in getattr(f, "name", ""):
        f.write(b"PK half a model")
        signal.raise_signal(signal.SIGINT)
    save(obj, f, *args, **kwargs)
StopOnInterrupt.on_train_batch_end, torch.save = first_ctrl_c, half_then_ctrl_c
""")
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    run, step, how = tmp_path / "run", 25 if stopped else 40, "a second Ctrl-C" if stopped else "Ctrl-C"
    ckpt = run / "checkpoints/last.ckpt"
    assert proc.stderr.splitlines()[-1] == f"aborted by {how} at step {step}, before model.pt was written; " \
        f"continue from {ckpt} with the same overrides plus ckpt_path={ckpt} (or resume=true)"
    assert load_resume_checkpoint(ckpt)["global_step"] == step
    assert not any(p.name.startswith((".model.pt", "model.pt")) for p in run.iterdir())
    assert read_summary(run)["status"] == ("stopped" if stopped else "ok") and not kept_on_resume(run)


def test_a_run_started_with_ctrl_c_ignored_keeps_ignoring_it(tmp_path: Path) -> None:
    """A run started in the background of a script (`python train.py &`) ignores SIGINT, as the shell set it, so that
    a Ctrl-C meant for the script's foreground leaves it training. StopOnInterrupt listened anyway: such a Ctrl-C
    stopped it, and a second one while model.pt was written did nothing (Lightning put the ignoring back)."""
    proc = train_patched(tmp_path, """
signal.signal(signal.SIGINT, signal.SIG_IGN)
stop_at = StopOnInterrupt.on_train_batch_end
def ctrl_c(self, trainer, *args):
    if trainer.global_step == 25:
        signal.raise_signal(signal.SIGINT)
    stop_at(self, trainer, *args)
StopOnInterrupt.on_train_batch_end = ctrl_c
""")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_summary(tmp_path / "run")["status"] == "ok" and read_summary(tmp_path / "run")["steps"] == 40
    assert (tmp_path / "run/model.pt").is_file()


def test_a_sigterm_that_lightning_answers_aborts_in_one_line(tmp_path: Path) -> None:
    """A SIGTERM in the moment between Lightning's handler and StopOnInterrupt's (or any under SLURM, left to
    Lightning): Lightning ended the run after its next step with exit status 0 and nothing said, as if it finished."""
    proc = train_patched(tmp_path, """
listen = StopOnInterrupt.on_train_start
def late(self, *args):
    signal.raise_signal(signal.SIGTERM)
    listen(self, *args)
StopOnInterrupt.on_train_start = late
""")
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == "aborted by SIGTERM at step 1, before model.pt was written; no checkpoint " \
        "was written yet: start again"
    assert not (tmp_path / "run/model.pt").exists()


@pytest.mark.parametrize("slurm, listens", [(False, True), (True, False)])
def test_sigterm_under_slurm_is_left_to_lightning(monkeypatch: pytest.MonkeyPatch, slurm: bool, listens: bool) -> None:
    """Under SLURM Lightning keeps the job alive after SIGTERM, so that its handler of the requeue signal can save the
    run and requeue it: its SIGTERM handler stays in place there, and is replaced while training elsewhere."""
    for name in ("SLURM_NTASKS", "SLURM_JOB_NAME", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    if slurm:
        monkeypatch.setenv("SLURM_NTASKS", "1")
        monkeypatch.setenv("SLURM_JOB_NAME", "train")
    stopper = StopOnInterrupt(sigterm=True)

    def lightnings(signum: int, frame: object) -> None:
        pass

    before = signal.signal(signal.SIGTERM, lightnings)
    try:
        stopper.on_train_start(None, None)
        assert (signal.getsignal(signal.SIGTERM) is not lightnings) == listens
        stopper.on_train_end(None, None)
        assert signal.getsignal(signal.SIGTERM) is lightnings
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize("second, how", [(signal.SIGTERM, "a second SIGTERM"), (signal.SIGINT, "Ctrl-C after SIGTERM")])
def test_a_signal_during_a_sigterm_stop_aborts_in_one_line(tmp_path: Path, second: int, how: str) -> None:
    """The second signal arrives in the step the first stops after, before the stop can finish: sent there, not
    timed. Lightning's handler, still in place after the first SIGTERM, would have waited for the next step."""
    proc = train_patched(tmp_path, f"""
stop_at = StopOnInterrupt.on_train_batch_end
def two_signals(self, trainer, *args):
    if trainer.global_step == 25:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal({int(second)})
    stop_at(self, trainer, *args)
StopOnInterrupt.on_train_batch_end = two_signals
""")
    assert proc.returncode == 128 + second, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    ckpt = tmp_path / "run/checkpoints/last.ckpt"
    assert proc.stderr.splitlines()[-1] == f"aborted by {how} at step 25, before model.pt was written; " \
        f"continue from {ckpt} with the same overrides plus ckpt_path={ckpt} (or resume=true)"
    assert load_resume_checkpoint(ckpt)["global_step"] == 20 and not (tmp_path / "run/model.pt").exists()


def damaged_copy(ckpt: Path, copy: Path, damage: str) -> None:
    """`ckpt` copied to `copy`, cut short, with a flipped bit, or as a tinygpt of an older layout would have
    saved it (its weights named otherwise)."""
    copy.write_bytes(ckpt.read_bytes())
    if damage == "cut short":
        copy.write_bytes(copy.read_bytes()[:copy.stat().st_size // 2])
    elif damage == "flipped bit":
        flip_a_bit_in(copy, "archive/data/0")
    else:
        state = torch.load(ckpt, weights_only=True)
        state["state_dict"] = {k.replace(".attn.query.", ".attn.q."): v for k, v in state["state_dict"].items()}
        torch.save(state, copy)


@pytest.mark.parametrize("case, overrides, message", [
    ("another model", ["model.dim=64"], r"holds another model \(model.tok_emb.weight is \[\d+, 32\] there, "
                                        r"\[\d+, 64\] here\): resume with the settings it was trained with"),
    ("another optimizer", ["optim=adamw"], r"holds the state of another optimizer than optim=adamw \(optim=muon's\): "
                                           "resume with optim=muon, or start afresh"),
    ("older format", [], r"holds another model \(model.blocks.0.attn.q.weight is \[32, 32\] there, absent here\)"),
    ("cut short", [], r"is not a readable torch file \(not written by torch.save, or cut short\)"),
    ("flipped bit", [], r"is damaged: its archive/data/0 does not match its checksum"),
])
def test_a_last_ckpt_that_cannot_resume_this_run_is_one_line_and_changes_nothing(
        trained: Path, case: str, overrides: list[str], message: str) -> None:
    """Through train.py's job in this process: each was a wall of missing keys or a traceback, or (a flipped
    bit) resumed from a different weight."""
    ckpt, before = trained / "checkpoints" / "last.ckpt", files_in(trained)
    with fresh_folder() as folder:
        if case in ("older format", "cut short", "flipped bit"):
            damaged_copy(ckpt, folder / "last.ckpt", case)
            ckpt = folder / "last.ckpt"
        run_dir = folder / "outputs" / "resumed"
        outcome = job([*TINY_RUN, "trainer.max_steps=40", f"ckpt_path={ckpt}", *overrides], run_dir, caps={})
        assert outcome.code == 2 and outcome.err.count("\n") == 1, outcome.err[-2000:]
        assert re.match(rf"error: {re.escape(str(ckpt))} {message}", outcome.err), outcome.err
        assert not run_dir.exists()
    assert files_in(trained) == before


def test_a_last_ckpt_of_another_optimizer_with_the_same_groups_is_refused_by_its_recorded_name(
        trained: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An optimizer added with another's parameter groups (SGD or Lion with AdamW's) passed the group check, and a
    run resumed under it loaded the other optimizer's state without a word: the checkpoint names its optimizer."""
    monkeypatch.setitem(OPTIMIZERS, "muon_twin", OPTIMIZERS["muon"])  # muon's groups under a name of its own
    ckpt, before = trained / "checkpoints" / "last.ckpt", files_in(trained)
    with fresh_folder() as folder:
        run_dir = folder / "outputs" / "resumed"
        outcome = job([*TINY_RUN, "trainer.max_steps=40", f"ckpt_path={ckpt}", "optim.name=muon_twin"], run_dir,
                      caps={})
        assert outcome.code == 2 and outcome.err == f"error: {ckpt} holds the state of another optimizer than " \
            "optim=muon_twin (optim=muon's): resume with optim=muon, or start afresh without ckpt_path or " \
            "resume=true\n", outcome.err[-2000:]
        assert not run_dir.exists()
    assert files_in(trained) == before


def test_a_last_ckpt_from_before_its_optimizer_was_recorded_resumes_checked_by_its_groups(
        trained: Path, tmp_path: Path) -> None:
    """One saved before the record has no name to compare: it resumes under its own optimizer, and under one of
    other groups is refused as before."""
    state = torch.load(trained / "checkpoints" / "last.ckpt", weights_only=True)
    del state[OPTIM_NAME]
    ckpt = tmp_path / "last.ckpt"
    torch.save(state, ckpt)
    with fresh_folder() as folder:
        refused = job([*TINY_RUN, "trainer.max_steps=40", f"ckpt_path={ckpt}", "optim=adamw"], folder / "adamw",
                      caps={})
        assert refused.code == 2 and refused.err == f"error: {ckpt} holds the state of another optimizer than " \
            "optim=adamw: resume with the settings it was trained with, or start afresh without ckpt_path or " \
            "resume=true\n", refused.err[-2000:]
        resumed = job([*TINY_RUN, "trainer.max_steps=40", f"ckpt_path={ckpt}"], folder / "muon", caps={})
        assert resumed.code == 0, resumed.err[-2000:]
        assert f"resuming from {ckpt} at step 30" in resumed.out
        assert load_resume_checkpoint(folder / "muon" / "checkpoints" / "last.ckpt")[OPTIM_NAME] == "muon"


# Four configurations (four rows), one job at a time so that "the third job" is one moment; checkpoints often.
SWEEP = ["-m", "trainer=debug", "trainer.max_steps=40", "callbacks.checkpoint.every_n_steps=5", "model.layers=1",
         "model.dim=32", "model.heads=1,2,4,8", "data.eval_lines=10", "data.batch_size=32", "hydra.launcher.n_jobs=1"]


def test_killed_sweep_resumes_keeping_finished_jobs_and_continuing_the_interrupted_one(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *SWEEP], cwd=tmp_path, start_new_session=True,
                            env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("multirun/*/*/2/checkpoints/last.ckpt")) and proc.poll() is None and \
            time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole process group, as a closed laptop lid or the OOM killer would
    proc.wait()
    sweep = next(tmp_path.glob("multirun/*/*"))
    folders = [sweep / str(n) for n in range(4)]
    assert not (folders[2] / "summary.json").exists() and not folders[3].exists(), "the sweep passed job 2 first"
    kept = {folder: (folder / "summary.json").read_bytes() for folder in folders[:2]}
    saved_step = load_resume_checkpoint(folders[2] / "checkpoints/last.ckpt")["global_step"]

    resumed = run_cli("train.py", *SWEEP, "resume=true", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming the sweep in {sweep.relative_to(tmp_path)}" in resumed.stdout
    assert resumed.stdout.count("finished before, kept") == 2
    assert f"resuming from {folders[2] / 'checkpoints/last.ckpt'} at step {saved_step}" in resumed.stdout
    assert 0 < saved_step < 40
    assert {folder: (folder / "summary.json").read_bytes() for folder in folders[:2]} == kept  # records untouched
    assert read_summary(folders[2])["resumed_at"] == saved_step  # the part it trained here sets the sweep's pace
    assert "resumed_at" not in read_summary(folders[3])
    # No job trained twice from the start: one Lightning log per job, plus the continuation of job 2.
    assert [len(list(folder.glob("csv/version_*"))) for folder in folders] == [1, 1, 2, 1]
    table = next(t for t in (sweep / "report.md").read_text().split("\n\n") if t.startswith("| configuration |"))
    rows = table.splitlines()[2:]
    assert len(rows) == 4 and all(row.endswith("| ok |") for row in rows)
    for folder, row in zip(folders[:2], rows):
        assert f"{json.loads(kept[folder])['val_loss']:.4f}" in row


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc: Linux, as CI)."""
    return [int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat")
            if alive(int(stat.parent.name)) and int(read_stat(stat)[1]) == pid]


def pause(pids: list[int], signum: int) -> None:
    """SIGSTOP or SIGCONT to each process of `pids` still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def read_stat(stat: Path) -> list[str]:
    """State and parent pid of a /proc/<pid>/stat ("" when the process has gone)."""
    try:
        return stat.read_text().rpartition(")")[2].split()[:2]
    except OSError:
        return ["", "0"]


def alive(pid: int) -> bool:
    """Running, not gone and not a zombie waiting for a reaper."""
    return read_stat(Path(f"/proc/{pid}/stat"))[0] not in ("", "Z", "X")


# Four jobs two at a time, long enough that both running jobs are killed mid-way; checkpoints often.
PARALLEL_SWEEP = [*(a for a in SWEEP if not a.startswith(("hydra.launcher", "trainer.max_steps"))),
                  "trainer.max_steps=100000", "hydra.launcher.n_jobs=2"]


def test_a_sweep_killed_alone_stops_its_workers_leaving_resumable_jobs(tmp_path: Path) -> None:
    """SIGKILL to the sweep's process only (kill <pid>, a crash of it, an OOM kill): joblib's workers used to train
    on, orphaned, through the jobs queued for them. Now each running job stops as Ctrl-C stops it and its worker
    ends; queued jobs never start."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *PARALLEL_SWEEP], cwd=tmp_path,
                            start_new_session=True, env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while len(list(tmp_path.glob("multirun/*/*/[01]/checkpoints/last.ckpt"))) < 2 and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = children_of(proc.pid)
        sweep = next(tmp_path.glob("multirun/*/*"))
        # Held by the sweep's process, not its workers, which train; a second sweep in the folder is refused.
        assert (sweep / SWEEP_LOCK).read_text() == f"{proc.pid}\n"
        pause(workers, signal.SIGSTOP)  # they train through none of the second sweep's seconds
        second = run_cli("train.py", *PARALLEL_SWEEP, "resume=true", cwd=tmp_path, timeout=60)
        pause(workers, signal.SIGCONT)
        assert second.returncode == 2 and second.stderr.splitlines()[-1] == f"error: {sweep.relative_to(tmp_path)} " \
            f"is in use by another sweep (process {proc.pid}): wait for it to end, or pass another hydra.sweep.dir="
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 120
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert workers and not any(alive(pid) for pid in workers), "the workers went on without their sweep"
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever of the group is left, so no test leaves it
            os.killpg(proc.pid, signal.SIGKILL)
    lock = locked(sweep / SWEEP_LOCK)  # killed, the sweep blocks no resume=true
    assert lock is not None
    lock.close()
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1"]  # the queued jobs never started
    for stopped in (sweep / "0", sweep / "1"):  # recorded as stopped, not finished, with a checkpoint to resume
        assert json.loads((stopped / "summary.json").read_text())["status"] == "stopped"
        assert 0 < load_resume_checkpoint(stopped / "checkpoints/last.ckpt")["global_step"] < 100000


def test_ctrl_c_to_a_sweep_saves_each_running_job_for_resume(tmp_path: Path) -> None:
    """Ctrl-C to the sweep's process (here to it alone, so the workers learn it from the sweep): joblib used to kill
    the workers at once, so a running job kept nothing since its last checkpoint (here: none). Now each running job
    finishes its step, saves last.ckpt and is recorded as stopped; the sweep exits 130; queued jobs never start."""
    sweep_args = [*PARALLEL_SWEEP, "callbacks.checkpoint.every_n_steps=100000"]
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *sweep_args], cwd=tmp_path,
                            start_new_session=True, env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while len(list(tmp_path.glob("multirun/*/*/[01]/history.csv"))) < 2 and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=GRACE_S + 60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    assert "Ctrl-C: each running job finishes its step and saves its checkpoint" in err
    # Each job's own line advised the overrides plus ckpt_path=, which trains that job alone, outside its sweep.
    stops = [line for line in err.splitlines() if line.startswith("stopped with its sweep at step")]
    assert len(stops) == 2 and all(line.endswith("; the sweep's command plus resume=true continues it")
                                   for line in stops), err[-2000:]
    sweep = next(tmp_path.glob("multirun/*/*"))
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1"]  # the queued jobs never started
    for stopped in (sweep / "0", sweep / "1"):
        summary = json.loads((stopped / "summary.json").read_text())
        assert summary["status"] == "stopped" and "stopped with its sweep at step" in summary["reason"]
        assert 10 <= load_resume_checkpoint(stopped / "checkpoints/last.ckpt")["global_step"] < 100000


def test_resume_that_finds_no_run_names_each_folder_it_searched_once(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # The run's own folder's parent (outputs/<date>) lies inside outputs/: it was listed beside it.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs" / "2026-11-26").mkdir(parents=True)
    with pytest.raises(CheckpointError, match=r"found no run with this config and a checkpoints/last.ckpt under "
                                              r"outputs, multirun: pass ckpt_path="):
        find_resume_checkpoint(OmegaConf.create({"model": {"dim": 8}}), [Path("outputs"), Path("multirun")],
                               tmp_path / "outputs" / "2026-11-26")


def test_resume_in_a_folder_of_its_own_reads_the_runs_beside_it_not_all_below_its_parent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hydra.run.dir=/tmp/b resume=true searched all of /tmp for runs of its config and stopped at a damaged record
    of another program's folder deep below it, advising to delete that folder."""
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "elsewhere" / "tests" / "run"
    (other / ".hydra").mkdir(parents=True)
    (other / "checkpoints").mkdir()
    (other / "checkpoints" / "last.ckpt").touch()
    (other / ".hydra" / "config.yaml").write_text("model: [unclosed\n")
    with pytest.raises(CheckpointError, match=rf"found no run with this config and a checkpoints/last.ckpt under "
                                              rf"outputs, multirun, {re.escape(str(tmp_path))}: pass ckpt_path="):
        resume_from(OmegaConf.create({"resume": True, "model": {"dim": 8}}), tmp_path / "b")


def a_runs_record_in(folder: Path, trained: Path) -> Path:
    """`folder` holding the record Hydra wrote for `python train.py *TINY_RUN` (the trained fixture's), claimed by no
    process, as a run's folder is after its run."""
    shutil.copytree(trained / ".hydra", folder / ".hydra")
    (folder / ".lock").touch()
    return folder


def preflight_error(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What train.py's checks before Hydra's run print for this command line in outputs/run: its refusal, or ''."""
    try:
        preflight(list(argv), CONFIGS, check_config, claim=True)
    except SystemExit as exit_:
        assert exit_.code == 2
    finally:
        release(Path("outputs/run"))
    return capsys.readouterr().err


def test_resume_in_a_runs_own_folder_with_another_config_is_refused_naming_the_first_setting(
        trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """resume=true model.heads=4 in the folder of a run made with model.heads=2 said "finished before, kept" as if
    that model were there, and Hydra wrote the command's config over the run's record; a stopped run went on at
    another optim.lr or seed without a word. A trainer.max_steps of its own is how a run is trained on."""
    monkeypatch.chdir(tmp_path)
    run = a_runs_record_in(tmp_path / "outputs" / "run", trained)
    record_stop(run, "stopped by Ctrl-C at step 10")
    before = files_in(run)
    folder = ["hydra.run.dir=outputs/run", "resume=true"]

    def resumed(*argv: str) -> str:
        return preflight_error(argv, capsys)

    # its trainer.max_steps given last: the command's own where it gives one
    made = [o for o in TINY_RUN if not o.startswith("trainer.max_steps=")] + ["trainer.max_steps=30"]
    command = f"python train.py {' '.join(made)} hydra.run.dir=outputs/run resume=true"
    for given, there, here in [("model.heads=4", "model.heads=2", "model.heads=4"),
                               ("optim.lr=1e-3", "optim.lr=0.003", "optim.lr=0.001"),
                               ("seed=1", "seed=1337", "seed=1"),
                               # an option as typed, not the composed key it sets (model.attention=gqa)
                               ("attention=gqa", "attention=mha", "attention=gqa"),
                               ("pos=rope", "pos=learned", "pos=rope"), ("optim=adamw", "optim=muon", "optim=adamw")]:
        assert resumed(*TINY_RUN, given, *folder) == f"error: resume=true: the run in outputs/run was made with " \
            f"{there}, and this command has {here}; resume it with the overrides it was made with ({command}), or " \
            "drop resume=true and pass another hydra.run.dir= to start a new run\n"
        assert files_in(run) == before
    assert resumed(*shlex.split(command.removeprefix("python train.py "))) == ""  # the command it names resumes
    assert resumed(*TINY_RUN, "trainer.max_steps=60", *folder) == ""  # trained further
    # The command's own overrides on configs/ as they were when the run was made: its config says what it is
    heads = [o.replace("model.heads=2", "model.heads=4") for o in TINY_RUN]
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(heads))
    assert resumed(*heads, *folder).endswith(
        "this command has model.heads=4; resume it with the settings its outputs/run/.hydra/config.yaml records, or "
        "drop resume=true and pass another hydra.run.dir= to start a new run\n")


def test_resume_in_a_runs_own_folder_with_another_data_option_names_it_as_typed(
        trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """data=copy sets model.block_size outside its own section, and the refusal named that composed key
    (model.block_size=16 against model.block_size=34), which neither command typed; here optim=adamw differs as well,
    and the option named is the one that sets the key."""
    monkeypatch.chdir(tmp_path)
    run = a_runs_record_in(tmp_path / "outputs" / "run", trained)
    before = files_in(run)
    made = [o for o in TINY_RUN if not o.startswith("trainer.max_steps=")] + ["trainer.max_steps=30"]
    copy = [o for o in TINY_RUN if not o.startswith("data.")] + ["data=copy"]
    for given in ([], ["optim=adamw"]):
        assert preflight_error([*copy, *given, "hydra.run.dir=outputs/run", "resume=true"], capsys) == \
            "error: resume=true: the run in outputs/run was made with data=calculator, and this command has " \
            f"data=copy; resume it with the overrides it was made with (python train.py {' '.join(made)} " \
            "hydra.run.dir=outputs/run resume=true), or drop resume=true and pass another hydra.run.dir= to start " \
            "a new run\n"
    assert files_in(run) == before


@pytest.mark.parametrize(("damage", "what"), [
    (lambda text: text[:300], "no top-level data: emptied or cut short"),
    (lambda text: "model: [unclosed\n", "while parsing a flow sequence"),
    (lambda text: "", "no top-level data: emptied or cut short")], ids=["cut short", "not YAML", "emptied"])
def test_resume_in_a_runs_own_folder_whose_config_record_is_damaged_compares_its_overrides(
        trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        damage: Callable[[str], str], what: str) -> None:
    """A run whose .hydra/config.yaml was damaged was not compared: resume=true model.heads=4 said the heads=2 run
    "finished before, kept" (a stopped one went on at another optim.lr), and Hydra wrote the command's config over
    the record. The overrides it records compose what it was made with; its own resume it, and Hydra writes the
    record whole again. With neither record readable, nothing says what the run is: refused, naming both."""
    monkeypatch.chdir(tmp_path)
    run = a_runs_record_in(tmp_path / "outputs" / "run", trained)
    config = run / ".hydra" / "config.yaml"
    config.write_text(damage(config.read_text()))
    before = files_in(run)
    made = [o for o in TINY_RUN if not o.startswith("trainer.max_steps=")] + ["trainer.max_steps=30"]
    damaged = f"outputs/run/.hydra/config.yaml is damaged ({what})"
    for given, there, here, own in [
            ("model.heads=4", "model.heads=2", "model.heads=4", ["resume=true"]),
            ("optim.lr=1e-3", "optim.lr=0.003", "optim.lr=0.001", ["ckpt_path=outputs/run/checkpoints/last.ckpt"])]:
        continues, how, other = ("resume=true", "resume", "drop resume=true and pass another hydra.run.dir= to start "
                                 "a new run") if own == ["resume=true"] else \
            (own[0], "continue", "pass another hydra.run.dir= to continue it with these settings in a run folder of "
             "its own")
        assert preflight_error([*TINY_RUN, given, "hydra.run.dir=outputs/run", *own], capsys) == \
            f"error: {continues}: the run in outputs/run was made with {there} (by the overrides in " \
            f"outputs/run/.hydra/overrides.yaml: {damaged}), and this command has {here}; {how} it with the " \
            f"overrides it was made with (python train.py {' '.join(made)} hydra.run.dir=outputs/run {continues}), " \
            f"or {other}\n"
        assert files_in(run) == before
    assert preflight_error([*TINY_RUN, "hydra.run.dir=outputs/run", "resume=true"], capsys) == ""
    (run / ".hydra" / "overrides.yaml").write_text("[unclosed\n")
    assert preflight_error([*TINY_RUN, "hydra.run.dir=outputs/run", "resume=true"], capsys) == \
        f"error: resume=true: {damaged}, and outputs/run/.hydra/overrides.yaml cannot be read either: nothing says " \
        "which settings the run was made with; write outputs/run/.hydra/overrides.yaml again from " \
        "hydra.overrides.task in the hydra.yaml beside it, or drop resume=true and pass another hydra.run.dir= to " \
        "start a new run\n"


def test_ckpt_path_of_a_runs_own_checkpoint_in_its_folder_with_another_config_is_refused(
        trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """ckpt_path= of a run's own last.ckpt in its folder with model.heads=4 trained the heads=2 run on as heads=4,
    and Hydra wrote heads=4 over the run's record, which then said its model.pt was all of a heads=4 model. A larger
    trainer.max_steps alone trains it further there, as before."""
    monkeypatch.chdir(tmp_path)
    run = a_runs_record_in(tmp_path / "outputs" / "run", trained)
    before = files_in(run)
    own = ["hydra.run.dir=outputs/run", "ckpt_path=outputs/run/checkpoints/last.ckpt"]

    def continued(*argv: str) -> str:
        return preflight_error(argv, capsys)

    made = [o for o in TINY_RUN if not o.startswith("trainer.max_steps=")] + ["trainer.max_steps=60"]
    assert continued(*made, "model.heads=4", *own) == "error: ckpt_path=outputs/run/" \
        "checkpoints/last.ckpt: the run in outputs/run was made with model.heads=2, and this command has " \
        f"model.heads=4; continue it with the overrides it was made with (python train.py {' '.join(made)} " \
        "hydra.run.dir=outputs/run ckpt_path=outputs/run/checkpoints/last.ckpt), or pass another hydra.run.dir= to " \
        "continue it with these settings in a run folder of its own\n"
    assert files_in(run) == before
    assert continued(*made, *own) == ""  # trained further in its own folder
    assert continued(*TINY_RUN, "model.heads=4", "hydra.run.dir=outputs/run",  # another run's checkpoint
                     f"ckpt_path={trained / 'checkpoints/last.ckpt'}") == ""
    # Once the folder holds a finished run, another run's checkpoint continued there would write over its record and
    # its model.pt, as a fresh run there would: it was let through.
    write_summary(run, {"status": "ok", "steps": 30})
    assert continued(*TINY_RUN, "hydra.run.dir=outputs/run", f"ckpt_path={trained / 'checkpoints/last.ckpt'}") == \
        "error: outputs/run holds a finished run; pass another hydra.run.dir=, or delete the folder to start it again\n"


@pytest.mark.parametrize("saved", [b"model: [unclosed\n", b"\xff\xfe", b"- 1\n"])
def test_a_damaged_saved_config_is_named_when_resume_searches(tmp_path: Path, saved: bytes) -> None:
    """A yaml.ParserError, UnicodeDecodeError or AttributeError traceback from any run folder under outputs/."""
    run = tmp_path / "outputs" / "2026-01-01" / "00-00-00"
    (run / ".hydra").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.ckpt").touch()
    (run / ".hydra" / "config.yaml").write_bytes(saved)
    with pytest.raises(CheckpointError, match=rf"^{run / '.hydra' / 'config.yaml'} is damaged \(.+\): delete the "
                                              r"folder holding it, or pass ckpt_path=<its checkpoints/last.ckpt> "
                                              r"instead of resume=true$"):
        find_resume_checkpoint(OmegaConf.create({"model": {"dim": 8}}), [tmp_path / "outputs"])


@pytest.mark.parametrize("saved", [b"", b"hydra:\n  run:\n    dir: outputs\n", b"a: 1\n"])
def test_a_damaged_sweep_record_is_named_when_resume_searches(tmp_path: Path, saved: bytes) -> None:
    """An emptied, cut-short or edited multirun.yaml parses as a mapping without the overrides the sweep was made
    with: resume=true stopped with an omegaconf ConfigAttributeError traceback (Missing key hydra)."""
    from gpt.training.sweep_resume import sweep_to_resume

    (tmp_path / "multirun.yaml").write_bytes(saved)
    cfg = OmegaConf.create({"resume": True, "hydra": {"sweep": {"dir": str(tmp_path)}, "sweeper": {},
                                                      "overrides": {"task": ["seed=0,1", "resume=true"]}}})
    with pytest.raises(CheckpointError, match=rf"^{tmp_path / 'multirun.yaml'} is damaged \(no hydra.overrides.task: "
                                              r"emptied or cut short\): delete the sweep folder holding it to run that "
                                              r"sweep again$"):
        sweep_to_resume(cfg)


def test_a_sweep_record_with_an_override_edited_unreadable_is_named(tmp_path: Path) -> None:
    """Its swept overrides are read with Hydra's parser, to compare their order: one it cannot read stopped
    resume=true with Hydra's OverrideParseException traceback."""
    from gpt.training.sweep_resume import sweep_to_resume

    sections = {"data": {}, "trainer": {}, "callbacks": {}, "optim": {}, "seed": 0}
    OmegaConf.save({**sections, "hydra": {"overrides": {"task": ["seed=0,1]"]}}}, tmp_path / "multirun.yaml")
    cfg = OmegaConf.create({"resume": True, "hydra": {"sweep": {"dir": str(tmp_path)}, "sweeper": {},
                                                      "overrides": {"task": ["seed=0,1", "resume=true"]}}})
    with pytest.raises(CheckpointError, match=rf"^{tmp_path / 'multirun.yaml'} is damaged \(Error parsing override "
                                              r"'seed=0,1\]'\): delete the sweep folder holding it"):
        sweep_to_resume(cfg)


def test_a_saved_config_cut_short_is_named_not_taken_for_another_config(tmp_path: Path) -> None:
    """A run's .hydra/config.yaml or a sweep's multirun.yaml cut short where it still parses (before its optim:
    section): resume=true said it found no run with this config, or that configs/ or the preset had changed since
    the sweep, naming neither file."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from gpt.training.sweep_resume import sweep_to_resume

    def cut(cfg: DictConfig, path: Path) -> None:
        whole = OmegaConf.to_yaml(cfg)
        path.write_text(whole[:whole.index("\noptim:") + 1])

    run = tmp_path / "outputs" / "2026-01-01" / "00-00-00"
    (run / ".hydra").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.ckpt").touch()
    cfg = compose_with(*FINISHED_RUN, "resume=true")
    cut(cfg, run / ".hydra" / "config.yaml")
    with pytest.raises(CheckpointError, match=rf"^{run / '.hydra' / 'config.yaml'} is damaged \(no top-level optim: "
                                              r"emptied or cut short\): delete the folder holding it"):
        find_resume_checkpoint(cfg, [tmp_path / "outputs"])
    trains = compose_with("trainer=debug", "~model", "~logger", "resume=true")  # whole: a run trains without both
    OmegaConf.save(trains, run / ".hydra" / "config.yaml")
    assert find_resume_checkpoint(trains, [tmp_path / "outputs"]) == run / "checkpoints" / "last.ckpt"

    def sweep(*overrides: str) -> DictConfig:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            return GlobalHydra.instance().config_loader().load_configuration(
                "train", ["trainer=debug", "seed=0,1", *overrides, f"hydra.sweep.dir={tmp_path}"], RunMode.MULTIRUN)

    cut(sweep(), tmp_path / "multirun.yaml")
    with pytest.raises(CheckpointError, match=rf"^{tmp_path / 'multirun.yaml'} is damaged \(no top-level optim: "
                                              r"emptied or cut short\): delete the sweep folder holding it"):
        sweep_to_resume(sweep("resume=true"))


def test_resuming_a_named_sweep_with_other_overrides_names_them(tmp_path: Path) -> None:
    """The sweep folder named with hydra.sweep.dir= but another trainer.max_steps: the refusal said it found no such
    sweep there and to pass the folder as hydra.sweep.dir=, which the command had done."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from gpt.training.sweep_resume import sweep_to_resume

    def sweep(*overrides: str) -> DictConfig:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            return GlobalHydra.instance().config_loader().load_configuration(
                "train", [*overrides, f"hydra.sweep.dir={tmp_path}"], RunMode.MULTIRUN)

    OmegaConf.save(sweep("trainer=debug", "trainer.max_steps=150", "seed=0,1"), tmp_path / "multirun.yaml")
    assert sweep_to_resume(sweep("trainer=debug", "trainer.max_steps=150", "seed=0,1", "resume=true")) == tmp_path
    with pytest.raises(ValueError, match=rf"^resume=true: the sweep in {tmp_path} was made with trainer.max_steps=150 "
                                         r"where this command has trainer.max_steps=200; resume it with the overrides"):
        sweep_to_resume(sweep("trainer=debug", "trainer.max_steps=200", "seed=0,1", "resume=true"))


def test_resuming_a_sweep_with_its_axes_in_another_order_is_refused(tmp_path: Path) -> None:
    """`seed=0,1 attention=mha,gqa` resumed `attention=mha,gqa seed=0,1`: the same overrides, but Hydra numbers the
    jobs in the order of the swept ones, so job 1 (gqa, seed 0) ran in the folder of (mha, seed 1): it kept or
    continued another job's results under its own config, and the report pooled them into the wrong row."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from gpt.training.sweep_resume import sweep_to_resume

    def sweep(*overrides: str) -> DictConfig:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            return GlobalHydra.instance().config_loader().load_configuration(
                "train", ["trainer=debug", *overrides, f"hydra.sweep.dir={tmp_path}"], RunMode.MULTIRUN)

    OmegaConf.save(sweep("attention=mha,gqa", "trainer.max_steps=30", "seed=0,1"), tmp_path / "multirun.yaml")
    # The overrides that sweep nothing number no jobs: their order is free.
    assert sweep_to_resume(sweep("trainer.max_steps=30", "attention=mha,gqa", "seed=0,1", "resume=true")) == tmp_path
    with pytest.raises(ValueError, match=rf"^resume=true: the sweep in {tmp_path} was made with its swept overrides in "
                                         r"the order attention=mha,gqa seed=0,1 \(the order that numbers its jobs\) "
                                         r"where this command has seed=0,1 attention=mha,gqa; resume it with the "
                                         r"overrides it was made with"):
        sweep_to_resume(sweep("seed=0,1", "attention=mha,gqa", "trainer.max_steps=30", "resume=true"))


def test_resume_picks_the_sweep_that_has_not_ended_over_a_newer_one_that_has(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The same sweep killed, then run again afresh to its end: resume=true went to the newest, the ended one, so the
    killed sweep's jobs were never run and its finished ones never reported."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from gpt.training.sweep_resume import sweep_to_resume
    from gpt.training.run_folder import write_summary

    monkeypatch.chdir(tmp_path)
    pattern = "hydra.sweep.dir=multirun/${now:%H-%M-%S-%f}"

    def sweep(*overrides: str) -> DictConfig:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            return GlobalHydra.instance().config_loader().load_configuration(
                "train", ["trainer=debug", "seed=0,1", pattern, *overrides], RunMode.MULTIRUN)

    killed, ended = tmp_path / "multirun" / "a", tmp_path / "multirun" / "b"
    for folder, statuses in ((killed, ["ok"]), (ended, ["ok", "refused"])):
        folder.mkdir(parents=True)
        OmegaConf.save(sweep(), folder / "multirun.yaml")
        for index, status in enumerate(statuses):
            (folder / str(index) / ".hydra").mkdir(parents=True)
            (folder / str(index) / ".hydra" / "config.yaml").write_text("{}")
            write_summary(folder / str(index), {"status": status})
    (ended / "report.md").write_text("# report\n")
    os.utime(killed / "multirun.yaml", (1, 1))  # the killed sweep is the older
    assert sweep_to_resume(sweep("resume=true")).resolve() == killed
    (killed / "report.md").write_text("# report\n")  # both ended: the newest, as before
    assert sweep_to_resume(sweep("resume=true")).resolve() == ended
    write_summary(ended / "1", {"status": "stopped", "reason": "stopped with its sweep"})  # not ended
    os.utime(killed / "multirun.yaml")
    os.utime(ended / "multirun.yaml", (1, 1))
    assert sweep_to_resume(sweep("resume=true")).resolve() == ended
    (killed / "report.md").unlink()  # killed, against a newer one that ran to its end with a failed job
    os.utime(killed / "multirun.yaml", (1, 1))
    os.utime(ended / "multirun.yaml")
    assert sweep_to_resume(sweep("resume=true")).resolve() == killed


FINISHED_RUN = ["trainer=debug", "trainer.max_steps=10", "model.layers=1", "model.dim=32", "model.heads=2",
                "data.batch_size=16", "data.eval_lines=10", "logger=none"]
# Its two seeds as a sweep, one job at a time in the sweep's own process (no worker processes to start).
FINISHED_SWEEP = ["-m", *FINISHED_RUN, "seed=0,1", "hydra.sweep.dir=sweep", "hydra.launcher.n_jobs=1"]


@pytest.fixture(scope="session")
def finished_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FINISHED_SWEEP run to its end once per session, for the tests that damage a copy of it (see copy_of); under
    pytest-xdist the first test process to need it makes it and the others wait for it."""
    with once_per_session(tmp_path_factory, "finished_sweep") as cwd:
        if not (cwd / "sweep/report.md").exists():
            shutil.rmtree(cwd, ignore_errors=True)  # a sweep that failed in another test process is made again
            cwd.mkdir()
            made = run_cli("train.py", *FINISHED_SWEEP, cwd=cwd)
            assert made.returncode == 0, made.stderr[-2000:]
    return cwd / "sweep"


def copy_of(sweep: Path, cwd: Path) -> Path:
    """`sweep` copied to `cwd`/sweep, where FINISHED_SWEEP run in `cwd` finds it (hydra.sweep.dir=sweep)."""
    return Path(shutil.copytree(sweep, cwd / "sweep"))


def test_a_run_killed_after_its_final_checkpoint_is_finished_from_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed between its final last.ckpt and model.pt: ckpt_path= (or resume=true) of it refused it as finished,
    naming its model.pt, which did not exist, and generate.py sent the user back to ckpt_path=: the trained model was
    unusable. Now it is finished without training, its model the checkpoint's weights."""
    monkeypatch.chdir(tmp_path)
    killed = train_in_process(tmp_path / "killed", *FINISHED_RUN).parent
    straight = load_checkpoint(killed / "model.pt")[0].state_dict()
    (killed / "model.pt").unlink()
    (killed / "summary.json").unlink()
    ckpt = killed / "checkpoints/last.ckpt"
    finished = train_in_process(tmp_path / "finished", *FINISHED_RUN, f"ckpt_path={ckpt}").parent
    model = load_checkpoint(finished / "model.pt")[0].state_dict()
    assert all(torch.equal(model[k], straight[k]) for k in straight)
    summary = json.loads((finished / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["steps"] == 10 and "all" in summary["val_acc"]
    assert summary["tokens_per_s"] is None  # nothing trained here: no speed to report
    # nor a peak memory: validation's alone, below any training's, was the report's best of its column
    assert summary["peak_memory_bytes"] is None
    history = (finished / "history.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in history[1:]] == ["10"]  # the final validation once, not twice
    # Its clock counted the repeated validation twice: that of the run it finishes, as an uninterrupted run's.
    killed_wall_s = read_history(killed)[-1]["wall_s"]
    assert read_history(finished)[-1]["wall_s"] == killed_wall_s == summary["wall_s"]
    assert load_resume_checkpoint(finished / "checkpoints/last.ckpt")["global_step"] == 10
    cfg = compose_with(*FINISHED_RUN, f"ckpt_path={finished / 'checkpoints/last.ckpt'}")
    with pytest.raises(ValueError, match=rf"has finished: .* \(its model: {finished / 'model.pt'}\)"):
        resume_from(cfg, finished)


def test_a_run_that_died_validating_at_a_checkpoint_step_resumes_with_that_validation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """last.ckpt was written before its step's validation, which Lightning does not replay on resuming: a run killed
    during it (both every 200 steps by default) resumed with no row for that step in history.csv. Written after it,
    the checkpoint is the previous one, and the resumed run validates there again."""
    monkeypatch.chdir(tmp_path)
    run = [*FINISHED_RUN, "trainer.max_steps=30", "trainer.val_check_interval=10",
           "callbacks.checkpoint.every_n_steps=10"]
    straight = read_history(train_in_process(tmp_path / "straight", *run).parent)

    def dies_at_step_20(self: SampleText, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step == 20:
            raise RuntimeError("killed while validating")

    with monkeypatch.context() as patch:
        patch.setattr(SampleText, "on_validation_epoch_end", dies_at_step_20)
        with pytest.raises(RuntimeError, match="killed while validating"):
            train_in_process(tmp_path / "killed", *run)
    ckpt = tmp_path / "killed/checkpoints/last.ckpt"
    assert load_resume_checkpoint(ckpt)["global_step"] == 10
    resumed = read_history(train_in_process(tmp_path / "resumed", *run, f"ckpt_path={ckpt}").parent)
    assert [(row["step"], row["val_loss"]) for row in resumed] == [(row["step"], row["val_loss"]) for row in straight]


def test_a_stopped_job_continued_and_killed_before_its_model_pt_is_not_kept_with_the_stopped_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's job stopped by Ctrl-C at step 5 wrote a model.pt of step 5; continued by resume=true and killed
    between its finished summary.json and its new model.pt, the next resume=true kept it as finished with the model
    of step 5 under a record of step 10. Now a continued run's folder holds no stale model.pt while it trains."""
    monkeypatch.chdir(tmp_path)
    job = train_in_process(tmp_path / "job", *FINISHED_RUN, "trainer.max_steps=5").parent
    write_summary(job, {"status": "stopped", "reason": "stopped by Ctrl-C at step 5"})  # as the stop records it

    def killed(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed")  # the process dies before writing model.pt

    monkeypatch.setattr("gpt.inference.checkpoint.save_model", killed)
    with pytest.raises(RuntimeError, match="killed"):
        train_in_process(job, *FINISHED_RUN, f"ckpt_path={job / 'checkpoints/last.ckpt'}")
    assert json.loads((job / "summary.json").read_text())["steps"] == 10
    assert not kept_on_resume(job)  # so resume=true finishes it from its final checkpoint


def logged_lrs(run_dir: Path) -> list[float]:
    """train/lr at each logged step, from Lightning's metrics.csv."""
    with open(run_dir / "csv/version_0/metrics.csv") as f:
        return [float(row["train/lr"]) for row in csv.DictReader(f) if row.get("train/lr")]


def test_a_finished_run_trained_further_names_its_lr_jump_and_keeps_its_schedule_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The schedule follows optim.max_steps: a finished cosine run continued with a larger trainer.max_steps leapt
    from its minimum LR back towards its peak without a word. Now a note names both LRs and how to keep the old
    schedule, and optim.max_steps=<its end> keeps it (at optim.min_lr)."""
    monkeypatch.chdir(tmp_path)
    run = [*(o for o in FINISHED_RUN if o != "logger=none"), "trainer.log_every_n_steps=1", "optim.warmup_steps=2"]
    first = train_in_process(tmp_path / "first", *run).parent
    (first / ".hydra").mkdir()
    OmegaConf.save(compose_with(*run), first / ".hydra/config.yaml")  # as Hydra records it beside the run
    ckpt = first / "checkpoints/last.ckpt"
    capsys.readouterr()
    further = train_in_process(tmp_path / "further", *run, "trainer.max_steps=20", f"ckpt_path={ckpt}").parent
    new_lr = 3e-3 * SCHEDULES["cosine"](10, OptimConfig(warmup_steps=2, max_steps=20))
    assert f"note: the LR schedule now ends at optim.max_steps=20: at step 10 the LR goes from 0.0003 (the " \
        f"checkpoint's schedule) to {new_lr:.3g}; to keep the checkpoint's schedule (at optim.min_lr after its end) " \
        "pass optim.max_steps=10" in capsys.readouterr().out
    assert logged_lrs(further)[0] == pytest.approx(new_lr)
    kept = train_in_process(tmp_path / "kept", *run, "trainer.max_steps=20", "optim.max_steps=10",
                            f"ckpt_path={ckpt}").parent
    assert "note: the LR" not in capsys.readouterr().out
    assert logged_lrs(kept) == pytest.approx([3e-4] * 10)


def test_a_run_killed_after_a_final_step_between_validations_keeps_its_clock(tmp_path: Path) -> None:
    """A last step off val_check_interval (7 of 10) validates at the end all the same: finished from its final
    checkpoint, the run's clock counted that validation twice, as its row was taken for a Ctrl-C's extra one."""
    run = [*FINISHED_RUN, "trainer.max_steps=7"]
    killed = train_in_process(tmp_path / "killed", *run).parent
    (killed / "model.pt").unlink()
    (killed / "summary.json").unlink()
    finished = train_in_process(tmp_path / "finished", *run, f"ckpt_path={killed / 'checkpoints/last.ckpt'}").parent
    assert [row["step"] for row in read_history(finished)] == [7]
    summary = json.loads((finished / "summary.json").read_text())
    assert read_history(finished)[-1]["wall_s"] == read_history(killed)[-1]["wall_s"] == summary["wall_s"]


def test_a_sweep_job_killed_after_its_final_checkpoint_is_finished_by_resume(tmp_path: Path,
                                                                            finished_sweep: Path) -> None:
    """resume=true kept such a job as "finished before" when only its model.pt was missing, and left it an
    unfinished row of the report when its summary.json was missing too."""
    job = copy_of(finished_sweep, tmp_path) / "0"
    (job / "model.pt").unlink()
    (job / "summary.json").unlink()
    (tmp_path / "sweep/report.md").unlink()
    resumed = run_cli("train.py", *FINISHED_SWEEP, "resume=true", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"finishing {job / 'checkpoints/last.ckpt'}: its training reached step 10" in resumed.stdout
    assert (job / "model.pt").is_file() and json.loads((job / "summary.json").read_text())["status"] == "ok"
    table = next(t for t in (tmp_path / "sweep/report.md").read_text().split("\n\n") if t.startswith("| configuration"))
    assert table.splitlines()[2].endswith("| ok |")


def test_a_sweep_job_whose_model_pt_is_damaged_is_finished_again_by_resume(tmp_path: Path,
                                                                           finished_sweep: Path) -> None:
    """A job whose summary.json says ok but whose model.pt was emptied or cut short (a full disk, a copy stopped
    halfway): resume=true kept it as finished before, and the sweep never wrote its model again. Now it is finished
    from its final checkpoint, its model.pt loadable."""
    sweep = copy_of(finished_sweep, tmp_path)
    emptied, cut = sweep / "0", sweep / "1"
    (emptied / "model.pt").write_bytes(b"")
    (cut / "model.pt").write_bytes((cut / "model.pt").read_bytes()[:3000])
    resumed = run_cli("train.py", *FINISHED_SWEEP, "resume=true", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "finished before, kept" not in resumed.stdout
    for folder in (emptied, cut):
        assert f"finishing {folder / 'checkpoints/last.ckpt'}: its training reached step 10, but its run stopped " \
            "before writing a whole model.pt; writing it without training" in resumed.stdout
        assert load_checkpoint(folder / "model.pt")[0] is not None and kept_on_resume(folder)


def test_a_sweep_job_whose_record_was_deleted_after_its_training_is_finished_by_resume(tmp_path: Path) -> None:
    """A finished job's summary.json deleted as its damaged line says (or replaced by a failure after training), its
    last.ckpt and model.pt intact: resume=true refused the job as finished, recorded as refused, on every resume, so
    its run never came back into the report."""
    job = tmp_path / "0"
    (job / "checkpoints").mkdir(parents=True)
    checkpoint = {"loops": {}, "optimizer_states": [], "global_step": 10, "state_dict": {}}
    torch.save(checkpoint, job / "checkpoints/last.ckpt")
    torch.save({}, job / "model.pt")  # whole: a damaged one is written again whatever the record says
    cfg = OmegaConf.create({"resume": True, "ckpt_path": None, "trainer": {"max_steps": 10}})
    assert resume_from(cfg, job, in_sweep=True).step == 10  # finished without training: record and model.pt
    with pytest.raises(ValueError, match=r"last.ckpt has finished: it is at step 10 of trainer.max_steps=10 \(its "):
        resume_from(OmegaConf.merge(cfg, {"resume": False, "ckpt_path": str(job / "checkpoints/last.ckpt")}), job,
                    in_sweep=True)


def test_a_sweep_job_whose_model_pt_and_last_ckpt_are_damaged_trains_again_keeping_its_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A finished job whose model.pt and last.ckpt were both cut short: resume=true failed it loading the checkpoint,
    the failure never replaced its finished record, and so on at every resume, its model never loadable again. Now
    it trains again from the start, its finished record kept while it does (a stop there leaves it)."""
    job = tmp_path / "0"
    (job / "checkpoints").mkdir(parents=True)
    (job / "checkpoints/last.ckpt").write_bytes(b"PK\x03\x04")
    (job / "model.pt").write_bytes(b"PK\x03\x04")
    record = {"status": "ok", "steps": 10, "wall_s": 1.0}
    write_summary(job, record)
    cfg = OmegaConf.create({"resume": True, "ckpt_path": None, "trainer": {"max_steps": 10}})
    assert not kept_on_resume(job) and resume_from(cfg, job, in_sweep=True) is None
    assert f"training again from the start: {job / 'model.pt'} and {job / 'checkpoints/last.ckpt'} are damaged" in \
        capsys.readouterr().out
    record_stop(job, "stopped by Ctrl-C at step 3")
    assert read_summary(job) == record


def test_a_sweep_whose_multirun_yaml_is_damaged_resumes_by_its_jobs_own_records(tmp_path: Path,
                                                                                finished_sweep: Path) -> None:
    """A truncated or hand-edited multirun.yaml: resume=true refused, advising to delete the sweep folder and with it
    the finished jobs' results. Each job's .hydra records its overrides and config: where every job that did work
    was made as this command's job of its number, the finished ones are kept and the others continue; where one
    was not, or its record is damaged, the refusal names that job."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from gpt.training.sweep_resume import sweep_to_resume

    folder = copy_of(finished_sweep, tmp_path)
    kept, unfinished = folder / "0", folder / "1"
    whole = (folder / "multirun.yaml").read_text()
    (folder / "multirun.yaml").write_text(whole[:whole.index("\noptim:") + 1])  # cut short
    (folder / "report.md").unlink()
    (unfinished / "summary.json").unlink()  # killed after its final checkpoint
    (unfinished / "model.pt").unlink()
    record = kept / "summary.json"
    before = record.read_bytes()

    def resumed(*overrides: str) -> Path:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3", job_name="train"):
            return sweep_to_resume(GlobalHydra.instance().config_loader().load_configuration(
                "train", [*FINISHED_RUN, *overrides, f"hydra.sweep.dir={folder}", "resume=true"], RunMode.MULTIRUN))

    with pytest.raises(ValueError, match=rf"^resume=true: {folder / 'multirun.yaml'} is damaged, and the sweep in "
                                         rf"{folder} has its job {unfinished} made with seed=1 where this command's "
                                         r"job 1 has seed=2; resume it with the overrides it was made "
                                         r"with \(its jobs' .hydra/overrides.yaml\)"):
        resumed("seed=0,2")
    with pytest.raises(ValueError, match=rf"has a job in {unfinished}, which this command's sweep of 1 job has none"):
        resumed("seed=0")
    config = kept / ".hydra/config.yaml"
    saved = config.read_text()
    config.write_text(saved.replace("seed: 0", "seed: 7"))
    with pytest.raises(ValueError, match=rf"has its job {kept} made with these overrides on another config"):
        resumed("seed=0,1")
    config.write_text(saved[:saved.index("\noptim:") + 1])
    with pytest.raises(CheckpointError, match=rf"^{config} is damaged \(no top-level optim: emptied or cut short\): "
                                              rf"delete that job's folder {kept} to run the job again \(the sweep's "
                                              r"other jobs are kept\)$"):
        resumed("seed=0,1")
    config.write_text(saved)
    assert resumed("seed=0,1") == folder

    again = run_cli("train.py", *FINISHED_SWEEP, "resume=true", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("finished before, kept") == 1 and record.read_bytes() == before
    assert f"finishing {unfinished / 'checkpoints/last.ckpt'}: its training reached step 10" in again.stdout
    assert (folder / "multirun.yaml").read_text() != whole[:whole.index("\noptim:") + 1]  # written whole again
    table = next(t for t in (folder / "report.md").read_text().split("\n\n") if t.startswith("| configuration"))
    (row,) = table.splitlines()[2:]  # both seeds in one row, each finished
    assert row.split(" | ")[1] == "2" and row.endswith("| ok |")


def test_a_finished_run_resumed_for_more_steps_is_kept_naming_the_command_that_trains_it_further(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """resume=true trainer.max_steps=12 in the folder of a run finished at step 10 said "finished before, kept" and
    trained nothing, not a word of the 12 steps asked for. A resumed sweep keeps such a job as it is, saying nothing
    more."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    monkeypatch.chdir(tmp_path)
    run = train_in_process(tmp_path / "run", *FINISHED_RUN).parent
    before = files_in(run)
    capsys.readouterr()
    train_in_process(run, *FINISHED_RUN, "trainer.max_steps=12", "resume=true")
    kept = f"finished before, kept: {finished_line(run)}"
    ckpt = run / "checkpoints/last.ckpt"
    line, advice = capsys.readouterr().out.splitlines()[-1].split(" run python train.py ")
    assert line == f"{kept}; it stopped at step 10, short of trainer.max_steps=12 (resume=true does not train a " \
        "finished run further): to train it further"
    *overrides, pasted = shlex.split(advice)
    assert overrides == [*FINISHED_RUN, "trainer.max_steps=12"]  # the command line as given, resume=true dropped
    override = OverridesParser.create().parse_override(pasted)
    assert (override.key_or_group, override.value()) == ("ckpt_path", str(ckpt))
    assert files_in(run) == before
    train_in_process(run, *FINISHED_RUN, "trainer.max_steps=12", "resume=true", "hydra.mode=MULTIRUN",
                     f"hydra.sweep.dir={tmp_path}")
    assert capsys.readouterr().out.splitlines()[-1] == kept and files_in(run) == before
    ckpt.unlink()
    train_in_process(run, *FINISHED_RUN, "trainer.max_steps=12", "resume=true")
    assert capsys.readouterr().out.splitlines()[-1] == f"{kept}; it stopped at step 10, short of " \
        "trainer.max_steps=12, and its checkpoints/last.ckpt is gone: drop resume=true and pass another " \
        "hydra.run.dir= to train it again from the start"


def test_the_checkpoint_a_refusal_names_pastes_whole_from_a_folder_with_a_space_and_a_comma(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The advice wrote ckpt_path=<path> as it was: pasted, a space split it into two words, and a comma made Hydra
    read a sweep of two paths."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    monkeypatch.chdir(tmp_path)
    run = train_in_process(tmp_path / "run", *FINISHED_RUN).parent
    moved = run.rename(tmp_path / "my run, v2")
    ckpt = moved / "checkpoints/last.ckpt"
    cfg = compose_with(*FINISHED_RUN)
    cfg.ckpt_path = str(ckpt)
    with pytest.raises(ValueError, match="has finished") as refused:
        resume_from(cfg, moved)
    advice = str(refused.value).split("to train it further pass ")[1].split(" and a larger")[0]
    [word] = shlex.split(advice)
    override = OverridesParser.create().parse_override(word)
    assert (override.key_or_group, override.value()) == ("ckpt_path", str(ckpt))
