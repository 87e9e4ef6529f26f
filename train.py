"""Train a GPT with Lightning from Hydra configs, then export a self-describing model.pt.

    python train.py                         # default model on the built-in calculator corpus
    python train.py model.heads=8 trainer.max_steps=500
    python train.py --help                  # config groups and the composed config
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from gpt.callbacks import HeldOutAccuracy
from gpt.checkpoint import CheckpointError, save_model
from gpt.config import ModelConfig
from gpt.lit import LitGPT
from gpt.report import record_failure
from gpt.run_record import RunRecord


def model_config(cfg: DictConfig, vocab_size: int) -> ModelConfig:
    return ModelConfig.from_dict({**OmegaConf.to_container(cfg.model, resolve=True), "vocab_size": vocab_size})


def train(cfg: DictConfig) -> Path:
    """Compose -> validate -> data -> LitGPT -> Trainer.fit -> model.pt; returns the model.pt path."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    model_config(cfg, vocab_size=1)  # refuse a bad model config before any data work
    L.seed_everything(cfg.seed, verbose=False)
    datamodule = instantiate(cfg.data)
    model_cfg = model_config(cfg, datamodule.vocab_size)
    if model_cfg.block_size < datamodule.max_tokens:
        raise ValueError(f"model.block_size={model_cfg.block_size} is shorter than the corpus's longest line "
                         f"({datamodule.max_tokens} tokens): set model.block_size={datamodule.max_tokens} or more")
    lit = LitGPT(model_cfg, max_steps=cfg.trainer.max_steps, **cfg.optim)
    callbacks = [ModelCheckpoint(dirpath=run_dir / "checkpoints", save_last=True, save_top_k=0,
                                 every_n_train_steps=cfg.callbacks.checkpoint.every_n_steps)]
    if hasattr(datamodule, "eval_problems"):
        callbacks.append(HeldOutAccuracy(datamodule.eval_problems, datamodule.tokenizer))
    callbacks.append(RunRecord(run_dir))  # history.csv + summary.json for the sweep report (gpt/report.py)
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    trainer = L.Trainer(**cfg.trainer, callbacks=callbacks, logger=logger, default_root_dir=run_dir)
    print(f"model: {lit.model.num_params():,} parameters; run folder: {run_dir}")
    trainer.fit(lit, datamodule=datamodule)
    path = run_dir / "model.pt"
    save_model(path, lit.model, datamodule.tokenizer, meta=datamodule.meta)
    print(f"saved {path}\ngenerate with: python generate.py --ckpt {path} --prompt \"two plus three equals\"")
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    try:
        train(cfg)
    except (ValueError, CheckpointError) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        if HydraConfig.get().mode == RunMode.MULTIRUN:  # a failed row in the sweep report; the other jobs go on
            record_failure(Path(HydraConfig.get().runtime.output_dir), err)
            return
        sys.exit(2)


if __name__ == "__main__":
    main()
