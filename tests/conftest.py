"""Shared fixtures: a tiny seeded model config, and a helper to run the CLIs as a user would."""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpt import GPT, ModelConfig

ROOT = Path(__file__).resolve().parents[1]
WORDS = "thou art more lovely and temperate rough winds do shake the darling buds of may".split()


def play(lines: int = 300, seed: int = 0) -> str:
    """A small seeded text of short lines with punctuation, so every tokenizer has work to do."""
    rng = random.Random(seed)
    return "".join(" ".join(rng.choices(WORDS, k=rng.randint(3, 8))) + rng.choice([",", ".", "!", ""]) + "\n"
                   for _ in range(lines))


@pytest.fixture
def tiny_cfg() -> ModelConfig:
    return ModelConfig(vocab_size=37, layers=2, heads=2, dim=32, block_size=16)


def build(cfg: ModelConfig, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(cfg).eval()


def run_cli(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run a repository script (train.py, generate.py, -m module) in `cwd`, offline, capturing output."""
    script = [args[0]] if args[0] == "-m" else [str(ROOT / args[0])]
    command = [sys.executable, *script, *args[1:]] if args[0] != "-m" else [sys.executable, *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "0"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


class CodeRunningPickle:
    """Unpickling this would create `marker`: a checkpoint payload that proves whether loading ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))
