"""Train a GPT with Lightning from Hydra configs, then export a self-describing model.pt.

    python train.py                         # default model on the built-in calculator corpus
    python train.py model.heads=8 trainer.max_steps=500
    python train.py resume=true             # continue the newest stopped run with this same config
    python train.py init_from=<Hugging Face folder or model.pt> data=text data.path=...   # fine-tune
    python train.py --help                  # config groups and the composed config
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from hydra.utils import get_class, instantiate
from lightning.fabric.utilities.exceptions import MisconfigurationException
from omegaconf import DictConfig, OmegaConf

from gpt.evaluation.bpb import byte_counts
from gpt.inference.checkpoint import CheckpointError, save_model
from gpt.model.config import ModelConfig
from gpt.model.gpt import check_parts
from gpt.sweeps.report import record_failure
from gpt.training.callbacks import (HeldOutAccuracy, Interrupted, ResumeCheckpoint, SampleText, StepProgressBar,
                           StopOnInterrupt, TrainingStopped, ValidateAtEnd)
from gpt.training.init_from import check_init_from, start_from
from gpt.training.lit import LitGPT
from gpt.training.loggers import finish, make_logger
from gpt.training.optim import OptimConfig
from gpt.training.preflight import preflight
from gpt.training.resume import AtomicCheckpointIO, find_resume_checkpoint, load_resume_checkpoint
from gpt.training.run_record import RunRecord
from gpt.validate import check_section, check_value

# Lightning's start-up notes (GPU/TPU availability, a logger advertisement) would bury our own lines, as
# would a deprecation inside Lightning that a user can do nothing about; other warnings still show.
logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")

CONFIGS = Path(__file__).resolve().parent / "configs"
SET_BY_TRAIN = ("callbacks", "logger", "plugins", "default_root_dir")  # train() passes these to the Trainer itself
HYDRA_RECORD = {".hydra", "train.log"}  # what Hydra writes into a run folder before the job starts


def model_config(cfg: DictConfig, vocab_size: int) -> ModelConfig:
    return ModelConfig.from_dict({**OmegaConf.to_container(cfg.model, resolve=True), "vocab_size": vocab_size})


def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU computes in bf16 itself (AVX512-BF16 or AMX, from Linux's flags); False where unknown."""
    if not cpuinfo.is_file():
        return False
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.read_text().splitlines()
                  if line.startswith("flags")), [])
    return bool({"avx512_bf16", "amx_bf16"} & set(flags))


def resolve_precision(precision: str, accelerator: str) -> str:
    """trainer.precision=auto: bf16 autocast where the hardware computes in bf16, else fp32. Without bf16
    instructions a CPU emulates it, slower than fp32."""
    if precision != "auto":
        return precision
    if accelerator == "cpu":
        return "bf16-mixed" if cpu_has_bf16() else "32-true"
    return "bf16-mixed" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "32-true"


def optim_config(cfg: DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(cfg.optim, resolve=True)


def user_values(node: DictConfig) -> dict[str, Any]:
    """A section's values as plain Python, less those interpolated from elsewhere (checked where they are set)."""
    values = OmegaConf.to_container(node, resolve=False)
    return {k: values[k] for k in node if k != "_target_" and not OmegaConf.is_interpolation(node, k)}


def check_config(cfg: DictConfig) -> None:
    """Refuse settings that cannot work, one line each, before any data or model work: every section against
    the signature of what it is passed to, top-level keys against the type of their default in train.yaml."""
    check_section("model", user_values(cfg.model), ModelConfig, not_settable=["vocab_size"])
    check_parts(model_config(cfg, vocab_size=1))
    check_section("data", user_values(cfg.data), get_class(cfg.data._target_))
    check_section("optim", user_values(cfg.optim), OptimConfig)
    precision = resolve_precision(str(cfg.trainer.precision), cfg.trainer.accelerator)
    check_section("trainer", {**user_values(cfg.trainer), "precision": precision}, L.Trainer, not_settable=SET_BY_TRAIN)
    OptimConfig.from_dict(optim_config(cfg))  # option names, and ranges that relate fields (after trainer.max_steps)
    check_section("callbacks.checkpoint", user_values(cfg.callbacks.checkpoint), ResumeCheckpoint, ["dirpath"])
    check_section("callbacks.sample", user_values(cfg.callbacks.sample), SampleText,
                  not_settable=["tokenizer", "one_example_per_line", "seed"])
    if cfg.get("logger"):
        check_section("logger", user_values(cfg.logger), get_class(cfg.logger._target_))
    for key, default in OmegaConf.load(CONFIGS / "train.yaml").items():
        if default is not None and not isinstance(default, (DictConfig, list)) and key in cfg:
            check_value(str(key), cfg[key], type(default))
    if str(cfg.trainer.precision).startswith("16") and cfg.trainer.accelerator == "cpu":
        raise ValueError(f"trainer.precision={cfg.trainer.precision} needs a GPU: on CPU use "
                         "trainer.precision=bf16-mixed or 32")
    if cfg.resume and cfg.ckpt_path:
        raise ValueError("pass either resume=true (newest run with this config) or ckpt_path=<path>, not both")
    check_init_from(cfg.init_from)


def resume_from(cfg: DictConfig, run_dir: Path) -> Path | None:
    """The checkpoint to continue from (checked to load safely now, not after the data is built)."""
    if cfg.resume:
        path = find_resume_checkpoint(cfg, [Path("outputs"), Path("multirun"), run_dir.parent])
    elif cfg.ckpt_path:
        path = Path(cfg.ckpt_path)
    else:
        return None
    step = load_resume_checkpoint(path)["global_step"]
    if 0 <= cfg.trainer.max_steps <= step:
        raise ValueError(f"{path} has finished: it is at step {step} of trainer.max_steps={cfg.trainer.max_steps} "
                         f"(its model: {path.parent.parent / 'model.pt'}); to train it further pass "
                         f"ckpt_path={path} and a larger trainer.max_steps")
    print(f"resuming from {path} at step {step}")
    return path


def discard_if_never_started(run_dir: Path) -> None:
    """Remove the folder Hydra made for a run that failed before writing anything of its own, and the date
    folder above it if that is left empty: failed configs leave no empty outputs/<date>/<time>/ behind."""
    cwd = Path.cwd().resolve()
    run_dir = run_dir.resolve()
    if run_dir == cwd or cwd.is_relative_to(run_dir) or not run_dir.is_dir():
        return
    own = [p for p in run_dir.rglob("*") if p.is_file() and p.relative_to(run_dir).parts[0] not in HYDRA_RECORD]
    if own:
        return
    shutil.rmtree(run_dir)
    for parent in run_dir.parents:
        if parent == cwd or not parent.is_relative_to(cwd) or any(parent.iterdir()):
            break
        parent.rmdir()


def summary_line(history: list[dict[str, float]], step: int, seconds: float, path: Path) -> str:
    """The run in one line: wall time, last val loss and held-out exact match, where model.pt is."""
    last = history[-1] if history else {}
    minutes, secs = divmod(round(seconds), 60)
    parts = [f"done in {minutes}m{secs:02d}s", f"step {step}"]
    if "val_loss" in last:
        parts.append(f"val loss {last['val_loss']:.4f}")
    if "val_acc_all" in last:
        parts.append(f"held-out exact match {100 * last['val_acc_all']:.1f}%")
    return ", ".join(parts) + f"; model: {path}"


def train(cfg: DictConfig, run_dir: Path | None = None) -> Path:
    """Compose -> validate -> data -> LitGPT -> Trainer.fit -> model.pt; returns the model.pt path."""
    start = time.perf_counter()
    run_dir = run_dir or Path(HydraConfig.get().runtime.output_dir)
    check_config(cfg)
    ckpt_path = resume_from(cfg, run_dir)
    checkpoint = ResumeCheckpoint(run_dir / "checkpoints", cfg.callbacks.checkpoint.every_n_steps)
    stopper = StopOnInterrupt()
    callbacks = [checkpoint, stopper, ValidateAtEnd()]
    if cfg.trainer.enable_progress_bar:
        callbacks.append(StepProgressBar())
    # The Trainer is built before the data so that its own argument checks also come before any work.
    precision = resolve_precision(str(cfg.trainer.precision), cfg.trainer.accelerator)
    trainer = L.Trainer(**{**cfg.trainer, "precision": precision}, callbacks=callbacks,
                        logger=make_logger(cfg.get("logger")), plugins=[AtomicCheckpointIO()], default_root_dir=run_dir)
    L.seed_everything(cfg.seed, verbose=False)
    try:
        datamodule = instantiate(cfg.data)
    except InstantiationException as err:  # Hydra wraps the DataModule's own one-line ValueError in many lines
        raise err.__cause__ if isinstance(err.__cause__, ValueError) else err from None
    # From scratch, or init_from's architecture and weights (gpt/training/init_from.py) when its tokenizer is the corpus's.
    model_cfg, weights = start_from(cfg.init_from, model_config(cfg, datamodule.vocab_size), datamodule.tokenizer)
    if model_cfg.block_size < datamodule.max_tokens:
        raise ValueError(f"model.block_size={model_cfg.block_size} is shorter than the corpus's longest line "
                         f"({datamodule.max_tokens} tokens): set model.block_size={datamodule.max_tokens} or more")
    line_based = datamodule.meta.get("one_example_per_line", False)
    # Bits per byte compares running-text models across tokenizers; a task's rows are not such text.
    token_bytes = None if line_based else byte_counts(datamodule.tokenizer)
    lit = LitGPT(model_cfg, compile=cfg.compile, token_bytes=token_bytes, **optim_config(cfg))
    if weights is not None:
        lit.model.load_state_dict(weights)
    sample = cfg.callbacks.sample
    trainer.callbacks.append(SampleText(datamodule.tokenizer, line_based, sample.prompt, sample.max_new_tokens,
                                        sample.temperature, cfg.seed))
    if hasattr(datamodule, "eval_examples"):
        trainer.callbacks.append(HeldOutAccuracy(datamodule.eval_examples, datamodule.tokenizer, datamodule.meta,
                                                 order=datamodule.groups))
    record = RunRecord(run_dir)  # history.csv + summary.json for the sweep report (gpt/sweeps/report.py)
    trainer.callbacks.append(record)
    print(f"model: {lit.model.num_params():,} parameters, precision {precision}; run folder: {run_dir}")
    trainer.fit(lit, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    path = run_dir / "model.pt"
    if not trainer.is_global_zero:  # under torchrun/SLURM every rank gets here; one writes the export
        return path
    finish(trainer.loggers)
    save_model(path, lit.model, datamodule.tokenizer, meta=datamodule.meta)
    # A line-based corpus suggests one of its own questions; running text, a place to start.
    example = getattr(datamodule, "example_prompt", None) or "<text to continue>"
    print(summary_line(record.history, trainer.global_step, time.perf_counter() - start, path))
    print(f'generate with: python generate.py --ckpt {path} --prompt "{example}"')
    if stopper.requested:
        raise Interrupted(f"stopped by Ctrl-C at step {trainer.global_step}; continue with the same overrides "
                          f"plus ckpt_path={checkpoint.path} (or resume=true)")
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        train(cfg, run_dir)
    except Interrupted as err:  # model.pt is saved, but `train && generate` must not go on as if it finished
        print(err, file=sys.stderr)
        if multirun:
            record_failure(run_dir, err)
        sys.exit(130)
    except (ValueError, CheckpointError, MisconfigurationException, TrainingStopped) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {str(err).strip().splitlines()[0]}", file=sys.stderr)
        if multirun:  # a failed row in the sweep report; the other jobs go on
            record_failure(run_dir, err)
            return
        discard_if_never_started(run_dir)
        sys.exit(1 if isinstance(err, TrainingStopped) else 2)


if __name__ == "__main__":
    preflight(sys.argv[1:], CONFIGS, check_config)
    main()
