"""Train a GPT with Lightning from Hydra configs, then export a self-describing model.pt.

    python train.py                         # default model on the built-in calculator corpus
    python train.py model.heads=8 trainer.max_steps=500
    python train.py resume=true             # continue the newest stopped run with this same config
    python train.py init_from=<Hugging Face folder or model.pt> data=text data.path=...   # fine-tune
    python train.py --help                  # config groups and the composed config
"""
from __future__ import annotations

import inspect
import logging
import os
import sys
from pathlib import Path

import hydra
import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from lightning.fabric.utilities.exceptions import MisconfigurationException
from omegaconf import DictConfig, OmegaConf

from gpt.callbacks import HeldOutAccuracy, ResumeCheckpoint, SampleText, StopOnInterrupt, TrainingStopped
from gpt.checkpoint import CheckpointError, save_model
from gpt.config import ModelConfig
from gpt.lit import LitGPT
from gpt.loggers import finish, make_logger
from gpt.pretrained import check_init_from, start_from
from gpt.report import record_failure
from gpt.resume import AtomicCheckpointIO, find_resume_checkpoint, load_resume_checkpoint
from gpt.run_record import RunRecord

# Lightning's start-up notes (GPU/TPU availability, a logger advertisement) would bury our own lines;
# warnings still show.
logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)

TRAINER_ARGS = set(inspect.signature(L.Trainer.__init__).parameters) - {"self"}
SET_BY_TRAIN = {"callbacks", "logger", "plugins", "default_root_dir"}  # train() passes these itself


def model_config(cfg: DictConfig, vocab_size: int) -> ModelConfig:
    return ModelConfig.from_dict({**OmegaConf.to_container(cfg.model, resolve=True), "vocab_size": vocab_size})


def check_config(cfg: DictConfig) -> None:
    """Refuse settings that cannot work, one line each, before any data or model work."""
    model_config(cfg, vocab_size=1)
    unknown = sorted(set(cfg.trainer) - (TRAINER_ARGS - SET_BY_TRAIN))
    if unknown:
        raise ValueError(f"trainer.{unknown[0]} is not a lightning.Trainer argument this script accepts; "
                         "see `python train.py --cfg job` and the Trainer docs")
    if str(cfg.trainer.precision).startswith("16") and cfg.trainer.accelerator == "cpu":
        raise ValueError(f"trainer.precision={cfg.trainer.precision} needs a GPU: on CPU use "
                         "trainer.precision=bf16-mixed or 32")
    every = cfg.callbacks.checkpoint.every_n_steps
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ValueError(f"callbacks.checkpoint.every_n_steps={every!r} must be a positive integer")
    if not isinstance(cfg.compile, bool) or not isinstance(cfg.resume, bool):
        raise ValueError(f"compile={cfg.compile!r} and resume={cfg.resume!r} must be true or false")
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
    print(f"resuming from {path} at step {step}")
    return path


def train(cfg: DictConfig, run_dir: Path | None = None) -> Path:
    """Compose -> validate -> data -> LitGPT -> Trainer.fit -> model.pt; returns the model.pt path."""
    run_dir = run_dir or Path(HydraConfig.get().runtime.output_dir)
    check_config(cfg)
    ckpt_path = resume_from(cfg, run_dir)
    checkpoint = ResumeCheckpoint(run_dir / "checkpoints", cfg.callbacks.checkpoint.every_n_steps)
    stopper = StopOnInterrupt()
    # The Trainer is built before the data so that its own argument checks also come before any work.
    trainer = L.Trainer(**cfg.trainer, callbacks=[checkpoint, stopper], logger=make_logger(cfg.get("logger")),
                        plugins=[AtomicCheckpointIO()], default_root_dir=run_dir)
    L.seed_everything(cfg.seed, verbose=False)
    datamodule = instantiate(cfg.data)
    # From scratch, or init_from's architecture and weights (gpt/pretrained.py) when its tokenizer is the corpus's.
    model_cfg, weights = start_from(cfg.init_from, model_config(cfg, datamodule.vocab_size), datamodule.tokenizer)
    if model_cfg.block_size < datamodule.max_tokens:
        raise ValueError(f"model.block_size={model_cfg.block_size} is shorter than the corpus's longest line "
                         f"({datamodule.max_tokens} tokens): set model.block_size={datamodule.max_tokens} or more")
    lit = LitGPT(model_cfg, compile=cfg.compile, **cfg.optim)
    if weights is not None:
        lit.model.load_state_dict(weights)
    sample = cfg.callbacks.sample
    trainer.callbacks.append(SampleText(datamodule.tokenizer, datamodule.meta.get("one_example_per_line", False),
                                        sample.prompt, sample.max_new_tokens, sample.temperature, cfg.seed))
    if hasattr(datamodule, "eval_examples"):
        trainer.callbacks.append(HeldOutAccuracy(datamodule.eval_examples, datamodule.tokenizer, datamodule.meta,
                                                 order=datamodule.groups))
    trainer.callbacks.append(RunRecord(run_dir))  # history.csv + summary.json for the sweep report (gpt/report.py)
    print(f"model: {lit.model.num_params():,} parameters; run folder: {run_dir}")
    trainer.fit(lit, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    path = run_dir / "model.pt"
    if not trainer.is_global_zero:  # under torchrun/SLURM every rank gets here; one writes the export
        return path
    finish(trainer.loggers)
    save_model(path, lit.model, datamodule.tokenizer, meta=datamodule.meta)
    prompt = getattr(datamodule, "example_prompt", None)  # line-based corpora: a question of their own kind
    example = f'--prompt "{prompt}"' if prompt else \
        '--prompt "<text to continue>" --max-new-tokens 200 --temperature 0.8'
    print(f"saved {path}\ngenerate with: python generate.py --ckpt {path} {example}")
    if stopper.requested:
        print(f"stopped by Ctrl-C at step {trainer.global_step}; continue with the same overrides plus "
              f"ckpt_path={checkpoint.path} (or resume=true)")
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    try:
        train(cfg)
    except (ValueError, CheckpointError, MisconfigurationException, TrainingStopped) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {str(err).strip().splitlines()[0]}", file=sys.stderr)
        if HydraConfig.get().mode == RunMode.MULTIRUN:  # a failed row in the sweep report; the other jobs go on
            record_failure(Path(HydraConfig.get().runtime.output_dir), err)
            return
        sys.exit(1 if isinstance(err, TrainingStopped) else 2)


if __name__ == "__main__":
    main()
