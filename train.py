"""Train a GPT with Lightning from Hydra configs, then export a self-describing model.pt: compose, check, build, fit,
export. The pieces live in gpt/training/; this file only wires them.

    python train.py                         # default model on the built-in calculator corpus
    python train.py model.heads=8 trainer.max_steps=500
    python train.py resume=true             # continue the newest stopped run with this same config
    python train.py init_from=<Hugging Face folder or model.pt> data=text data.path=...   # fine-tune
    python train.py --help                  # config groups and the composed config
"""
from __future__ import annotations

import atexit
import logging
import os
import shlex
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from gpt.training.preflight import preflight
from gpt.training.recorded import as_typed, built
from gpt.validate import first_line

if TYPE_CHECKING:
    import lightning as L

CONFIGS = Path(__file__).resolve().parent / "configs"


def quiet_lightning() -> None:
    """Lightning's start-up notes (GPU/TPU availability, a logger advertisement) would bury our own lines, as
    would a deprecation inside Lightning that a user can do nothing about; other warnings still show. Set in
    train() rather than at import, so that a sweep's worker processes (which never import this file) set it too,
    and where trainer=ddp starts a process of its own (below)."""
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    logging.getLogger("lightning.fabric.utilities.distributed").setLevel(logging.WARNING)  # every rank's start-up
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    # On a machine of more than two cores Lightning advises DataLoader workers for both loaders, at every run. The
    # batches are cut from memory-mapped tokens in the main process, and each worker would replay the one seeded
    # stream (gpt/data/batches.py): the advice would duplicate the training data, not speed it.
    warnings.filterwarnings("ignore", message=r"The '\w+' does not have many workers")


def end_rank(signum: int, frame: FrameType | None) -> None:
    sys.exit(128 + signum)


def end_process_group() -> None:
    """Lightning destroys an NCCL process group at exit, but not the gloo one of trainer=ddp on CPU, whose worker
    threads then live on into the interpreter's teardown: a known way for a rank to abort as it ends ("terminate called
    without an active exception"), which fails a run that had trained and saved."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


# Every process that trains as a rank: trainer=ddp's (ddp_spawn) and those torchrun or SLURM start (strategy=ddp)
atexit.register(end_process_group)

# trainer=ddp's ranks (ddp_spawn) are new processes that import this file under this name and are handed the
# Trainer: train() never runs in them, and rank 0 among them trains, so their notes and warnings were all shown.
if __name__ == "__mp_main__":
    quiet_lightning()
    # Until StopOnInterrupt listens, Ctrl-C ends the rank with an exit status the waiting process sees. As a
    # KeyboardInterrupt, torch's spawn wrapper ended the rank with 0 and no result, which that process awaited forever;
    # so did Lightning's answer to the SIGTERM that process passes on (left to Lightning under SLURM).
    signal.signal(signal.SIGINT, end_rank)
    from gpt.training.interrupts import lightning_answers_sigterm

    if not lightning_answers_sigterm():
        signal.signal(signal.SIGTERM, end_rank)


def load_data(cfg: DictConfig, overrides: Sequence[str]) -> L.LightningDataModule:
    from omegaconf import OmegaConf

    from gpt.training.checks import data_arguments

    return built(OmegaConf.to_container(cfg.data, resolve=True), **data_arguments(cfg, overrides))


def train(cfg: DictConfig, run_dir: Path | None = None) -> Path | None:
    """Compose -> validate -> data -> LitGPT -> Trainer.fit -> model.pt; returns the model.pt path (none for a sweep's
    job that would repeat another job's run)."""
    # torch and Lightning are imported by the process that trains, here: `python train.py --help` and the process
    # that launches a sweep's jobs into worker processes never pay for them (seconds of start-up).
    import lightning as L
    from lightning.pytorch.strategies.launchers import _MultiProcessingLauncher
    from lightning.pytorch.utilities.exceptions import SIGTERMException
    from torch.multiprocessing import ProcessExitedException

    from gpt.evaluation.bpb import byte_counts
    from gpt.inference.checkpoint import save_model
    from gpt.overrides import override_key, pasted
    from gpt.sweeps.parallel import stopping
    from gpt.sweeps.repeats import recorded_sweep, repeated
    from gpt.training.callbacks import (HeldOutAccuracy, LossAtLengths, ResumeCheckpoint, SampleText, StepProgressBar,
                                        ValidateAtEnd)
    from gpt.training.checkpoint_io import AtomicCheckpointIO, load_resume_checkpoint
    from gpt.training.checks import check_accelerator, check_config, check_fits, check_lengths, optim_config
    from gpt.training.init_from import start_from
    from gpt.training.interrupts import SIGNAL_NAMES, Interrupted, StopOnInterrupt, aborted
    from gpt.training.lightning_checks import check_launch
    from gpt.training.lit import LitGPT
    from gpt.training.loggers import finish, make_logger
    from gpt.training.model_settings import (check_settings_read, forced_unread, given_model_settings, model_accepts,
                                             model_config)
    from gpt.training.resume import check_resumable, resume_from, train_further
    from gpt.training.run_folder import kept_on_resume, read_history, read_summary, record_duplicate
    from gpt.training.run_record import RunRecord, finished_line, summary_line, validation_off
    from gpt.training.section_values import trainer_arguments

    start = time.perf_counter()
    quiet_lightning()
    run_dir = run_dir or Path(HydraConfig.get().runtime.output_dir)
    overrides = as_typed(HydraConfig.get().overrides.task)
    in_sweep = HydraConfig.get().mode == RunMode.MULTIRUN
    sweep = recorded_sweep(Path(HydraConfig.get().sweep.dir)) if in_sweep else []
    check_config(cfg, overrides, sweep)
    check_accelerator(cfg.trainer)
    # A resumed sweep's job that had finished stands; one killed before its model.pt is finished below.
    if cfg.resume and kept_on_resume(run_dir):
        further = "" if in_sweep else train_further(run_dir, cfg.trainer.max_steps, overrides)
        print(f"finished before, kept: {finished_line(run_dir)}{further}")
        return run_dir / "model.pt"
    ignores = [] if cfg.init_from else forced_unread(cfg, overrides)  # init_from's model is checked once loaded
    if same := repeated(ignores, sweep, lambda override: model_accepts(cfg, override)):
        reason = f"the same run as the job with {' '.join(same)}: a model of attention={cfg.model.attention}, " \
            f"pos={cfg.model.pos} reads no {', '.join(override_key(o) for o in ignores)}"
        record_duplicate(run_dir, reason, ignores)
        print(f"not trained: {reason}")
        return None
    resume_point = resume_from(cfg, run_dir, in_sweep=in_sweep)
    checkpoint = ResumeCheckpoint(run_dir / "checkpoints", cfg.callbacks.checkpoint.every_n_steps)
    # SIGTERM stops a single run; a sweep's job stops when its sweep stops (gpt.sweeps.parallel).
    stopper = StopOnInterrupt(stopping, sigterm=not in_sweep)
    # record: history.csv + summary.json for the report, going on from the run a checkpoint of another folder ends
    record = RunRecord(run_dir, continues=resume_point.path.parent.parent if resume_point else None, ignores=ignores)
    callbacks = [checkpoint, stopper, ValidateAtEnd(), record]
    if cfg.trainer.enable_progress_bar:
        callbacks.append(StepProgressBar())
    # The Trainer is built before the data so that its own argument checks also come before any work.
    arguments = trainer_arguments(cfg)
    precision = arguments["precision"]
    off = validation_off(arguments.get("limit_val_batches"))
    trainer = L.Trainer(**arguments, callbacks=callbacks,
                        logger=make_logger(cfg.get("logger")), plugins=[AtomicCheckpointIO()], default_root_dir=run_dir)
    check_launch(trainer, cfg.trainer.strategy, in_sweep)
    L.seed_everything(cfg.seed, verbose=False)
    data = load_data(cfg, overrides)
    # From scratch, or init_from's architecture and weights when its tokenizer is the corpus's.
    model_cfg, weights, pretrained = start_from(cfg.init_from, model_config(cfg, data.vocab_size), data.tokenizer,
                                                given_model_settings(cfg, overrides, forced=True))
    if cfg.init_from:  # its model's parts, known now: check_config checked those of the config
        check_settings_read(given_model_settings(cfg, overrides), model_cfg)
    check_fits(model_cfg, data)
    check_lengths(cfg.callbacks.lengths.at, data)
    # Bits per byte compares running-text models across tokenizers; a task's rows are not such text.
    line_based = data.meta.get("one_example_per_line", False)
    if line_based and "split_settings" in pretrained:
        data.check_split_as(pretrained["split_settings"], f"init_from={cfg.init_from}", "drop init_from")
    lit = LitGPT(model_cfg, compile=cfg.compile, token_bytes=None if line_based else byte_counts(data.tokenizer),
                 **optim_config(cfg))
    if weights is not None:
        lit.model.load_state_dict(weights)
    if resume_point:
        check_resumable(resume_point, lit)
        # The model.pt a stop wrote here is of an earlier step: killed after this run's summary.json says ok and
        # before its own model.pt, the folder would read as finished with that model (resume=true keeps it).
        (run_dir / "model.pt").unlink(missing_ok=True)
    sample = cfg.callbacks.sample
    trainer.callbacks.append(SampleText(data.tokenizer, data.meta, sample.prompt, sample.max_new_tokens,
                                        sample.temperature, cfg.seed))
    if hasattr(data, "graded_lines"):
        trainer.callbacks.append(HeldOutAccuracy(data.graded_lines, data.tokenizer, data.groups, data.level_names))
    if cfg.callbacks.lengths.at:
        trainer.callbacks.append(LossAtLengths(**cfg.callbacks.lengths))
    if trainer.is_global_zero:  # every rank gets here under trainer.strategy=ddp (run again), torchrun or SLURM
        print(f"model: {lit.model.num_params():,} parameters, precision {precision}; run folder: {run_dir}")
        for note in data.notes:
            print(f"note: {note}")
        # trainer=ddp's devices=auto on a machine without a GPU is the CPU, one device: it ran one process, silently
        if "ddp" in str(cfg.trainer.strategy) and trainer.world_size == 1:
            device = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()
            print(f"note: trainer.strategy={cfg.trainer.strategy} has one device here ({device}), so one process "
                  "trains, with no data parallelism; on a CPU, trainer.accelerator=cpu trainer.devices=2 trains two")
        if off:
            print(f"note: {off} turns validation off: this run records no val loss, held-out exact match or "
                  "history.csv row, not even at its last step; drop it to validate")
        # A short run (trainer=debug) never reaches its LR: the steps it trains, not optim.max_steps (its schedule's
        # end, given apart to keep a continued run's schedule), since every schedule warms up alike.
        if 0 < (steps := cfg.trainer.max_steps) <= lit.optim.warmup_steps:
            print(f"note: trainer.max_steps={steps} ends within optim.warmup_steps={lit.optim.warmup_steps}: the LR "
                  f"only warms up, to {steps / lit.optim.warmup_steps:.0%} of its peak; lower optim.warmup_steps to "
                  "train at it")
    # trainer=ddp (ddp_spawn): the ranks train in processes that this one starts and waits for
    spawned = isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)
    try:
        with stopper.while_ranks_train(trainer.strategy.launcher) if spawned else nullcontext():
            trainer.fit(lit, datamodule=data, ckpt_path=resume_point.path if resume_point else None,
                        weights_only=True)
    # SystemExit: Lightning's exit(1) after a KeyboardInterrupt, the second Ctrl-C, which aborts at once, or its
    # SIGTERMException, for a SIGTERM it answered (under SLURM, or one that came before StopOnInterrupt listened). A
    # rank's exit 130 or 143 (end_rank), or its death by SIGTERM: under trainer=ddp the first Ctrl-C or SIGTERM reached
    # the ranks still starting up.
    except (SystemExit, ProcessExitedException) as err:
        sigterm = isinstance(err, SIGTERMException) and not stopper.requested and not in_sweep
        if not (stopper.requested or sigterm) or isinstance(err, ProcessExitedException) and \
                err.exit_code not in (130, 143, -signal.SIGTERM):
            raise
        if spawned:  # a rank may still be writing the checkpoint of the stop the first signal asked for
            for rank in trainer.strategy.launcher.procs:
                rank.join()
        how = "SIGTERM" if sigterm else stopper.abort_how() if isinstance(err, SystemExit) else \
            SIGNAL_NAMES[stopper.signum]
        raise aborted(how, None if spawned else trainer.global_step, checkpoint.path,  # spawned: trained no step here
                      signal.SIGTERM if sigterm else stopper.aborted_by or stopper.signum) from None
    path = run_dir / "model.pt"
    try:
        if resume_point and resume_point.step == trainer.max_steps:
            # A run killed after its final checkpoint: Lightning restored it and skipped the training loop with its
            # hooks. End it as that loop ends: a checkpoint in this folder, the final validation (its grading) and the
            # record.
            record.on_train_start(trainer, lit)
            if not checkpoint.path.is_file():
                checkpoint.save(trainer)
            trainer.validate(lit, datamodule=data, verbose=False)
            record.on_train_end(trainer, lit)
        if not trainer.is_global_zero:  # under torchrun/SLURM every rank gets here; one writes the export
            return path
        finish(trainer.loggers)
        save_model(path, lit.model, data.tokenizer, meta=data.meta)  # atomic: a Ctrl-C leaves no part of it
    # A Ctrl-C once training has ended, the second after a stop or the first after the last step, is Python's
    # KeyboardInterrupt here (Lightning's exit(1) after one, in the validation above): a traceback, not a stop's line.
    except (KeyboardInterrupt, SystemExit) as err:
        if isinstance(err, SIGTERMException):
            raise
        how = stopper.abort_how() if stopper.requested else "Ctrl-C"
        raise aborted(how, None if spawned else trainer.global_step, checkpoint.path,
                      stopper.aborted_by or signal.SIGINT) from None
    # From the records on disk: under trainer=ddp (spawn) rank 0 trained in another process, not in this one. A stop's
    # summary.json holds no steps; the last.ckpt that the stop wrote does.
    summary = read_summary(run_dir) or {}
    steps = summary.get("steps", trainer.global_step)
    if spawned and stopper.requested and summary.get("status") == "ok":
        stopper.requested = False  # the ranks' last step ended as the signal came: they finished (StopOnInterrupt)
    if spawned and stopper.requested:
        steps = load_resume_checkpoint(checkpoint.path)["global_step"]
    took = "stopped after" if stopper.requested else "done in"
    print(summary_line(read_history(run_dir), steps, time.perf_counter() - start, path, took, off))
    # A line-based corpus suggests one of its own held-out questions; running text starts after a newline (a
    # placeholder prompt would be refused by a word-level vocabulary).
    example = getattr(data, "example_prompt", None)
    # Quoted for the shell: a run folder under a path with a space is pasted whole. generate.py by its path where
    # train.py was run from another folder.
    script = Path(__file__).resolve().with_name("generate.py")
    shown = script.name if script.parent == Path.cwd().resolve() else str(script)
    command = ["python", shown, "--ckpt", str(path), *(["--prompt", example] if example else [])]
    print(f"generate with: {shlex.join(command)}")
    if stopper.requested:
        # A sweep's job goes on with its sweep: ckpt_path= of it would train it alone, outside the sweep's report.
        then = "the sweep's command plus resume=true continues it" if in_sweep else \
            f"continue with the same overrides plus {pasted('ckpt_path', str(checkpoint.path))} (or resume=true)"
        raise Interrupted(f"stopped {stopper.how} at step {steps}; {then}", stopper.signum)
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    from gpt.sweeps.parallel import worker_job

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    if multirun:  # jobs side by side write to one stdout and stderr: whole lines, not interleaved halves of buffers
        sys.stdout.reconfigure(line_buffering=True)
        # stderr writes through: print's text and its newline were two writes, and two jobs' stop lines ran together
        # ("...continues itstopped with its sweep...").
        sys.stderr.reconfigure(line_buffering=True, write_through=False)
    with worker_job(run_dir) if multirun else nullcontext(True) as run:
        if run:
            run_job(cfg, run_dir, multirun)


def run_job(cfg: DictConfig, run_dir: Path, multirun: bool) -> None:
    """train() with its failures as one line and an exit status; in a sweep a failed (or refused) row in the report,
    and the other jobs go on."""
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from gpt.inference.checkpoint import CheckpointError
    from gpt.training.callbacks import TrainingStopped
    from gpt.training.interrupts import Interrupted
    from gpt.training.run_folder import Damaged, record_failure, record_stop
    from gpt.training.run_folder_lock import discard_if_never_started

    try:
        train(cfg, run_dir)
    except Interrupted as err:  # model.pt is saved, but `train && generate` must not go on as if it finished
        print(err, file=sys.stderr)
        if multirun:
            record_stop(run_dir, first_line(err))
        sys.exit(err.status)
    except (ValueError, MisconfigurationException, TrainingStopped) as err:  # CheckpointError is a ValueError
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {first_line(err)}", file=sys.stderr)
        if multirun:  # a mistake in the configuration refuses this job only; a NaN or a damaged file failed it
            record_failure(run_dir, err, refused=not isinstance(err, (TrainingStopped, CheckpointError, Damaged)))
            return
        discard_if_never_started(run_dir)
        sys.exit(1 if isinstance(err, TrainingStopped) else 2)
    except Exception as err:
        if not multirun or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        # A crash (out of memory, a bug) fails this job's row; raised, it would end the sweep at its end with no
        # report, the finished jobs' results unsummarised.
        traceback.print_exc()
        record_failure(run_dir, err)


def check_command(cfg: DictConfig, *, sweep: Sequence[str] = (), lightning: bool = True) -> None:
    """gpt.training.checks.check_config, imported only by a command whose config composes (it needs torch)."""
    from gpt.training.checks import check_config

    check_config(cfg, sweep=sweep, lightning=lightning)


def cli() -> None:
    """`python train.py <overrides>`: the checks, then Hydra's main."""
    try:
        sys.argv[1:] = preflight(sys.argv[1:], CONFIGS, check_command, claim=True)
        main()
    # Ctrl-C before training began: StopOnInterrupt listens from the first step, and train() words one after the
    # last. Python's traceback came from wherever the run was (importing Lightning, training a tokenizer, building
    # the model), and the run folder stayed behind with nothing of the run's in it.
    except KeyboardInterrupt:
        from gpt.training.run_folder_lock import discard_claimed_if_never_started

        discard_claimed_if_never_started()
        print("stopped by Ctrl-C before training began: nothing was trained or saved", file=sys.stderr)
        sys.exit(128 + signal.SIGINT)


if __name__ == "__main__":
    cli()
