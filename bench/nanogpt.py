"""Real nanoGPT (a checkout of github.com/karpathy/nanoGPT) run beside tinygpt by bench/quality_per_time.py: its
CPU Tiny Shakespeare (char) recipe, its log parsed into the history and summary a tinygpt run leaves. Nothing of
nanoGPT is copied here; the bench runs its own train.py in its own folder."""
from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

# nanoGPT's README, "I only have a macbook": its Shakespeare (char) recipe sized for a CPU.
CPU_RECIPE = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
              "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128",
              "--max_iters=2000", "--lr_decay_iters=2000", "--dropout=0.0"]
DATA = Path("data/shakespeare_char")
EVAL_LINE = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)")
ITER_LINE = re.compile(r"^iter (\d+): loss ([\d.]+), time ([\d.]+)ms")
TOKENS_LINE = re.compile(r"^tokens per iteration will be: ([\d,]+)")
PARAMS_LINE = re.compile(r"^num (?:non-)?decayed parameter tensors: \d+, with ([\d,]+) parameters")


def check_checkout(checkout: Path) -> None:
    if not (checkout / "train.py").is_file() or not (checkout / "config/train_shakespeare_char.py").is_file():
        raise SystemExit(f"error: --nanogpt {checkout} is not a nanoGPT checkout (no train.py and "
                         "config/train_shakespeare_char.py): git clone https://github.com/karpathy/nanoGPT")


def prepare(checkout: Path, corpus: Path) -> None:
    """nanoGPT's own data/shakespeare_char/prepare.py on `corpus` (as its input.txt, so nothing downloads),
    once per corpus: its train.bin is the first 90% of the characters and val.bin the last 10%."""
    folder = checkout / DATA
    # Prepared from another text (an earlier --corpus, or nanoGPT's own download), nanoGPT would train and be scored
    # on that text while tinygpt trains on this one.
    if (folder / "train.bin").is_file() and (folder / "input.txt").is_file() and \
            (folder / "input.txt").read_bytes() == corpus.read_bytes():
        return
    shutil.copyfile(corpus, folder / "input.txt")
    print(f"preparing nanoGPT's data: python {DATA / 'prepare.py'} in {checkout}", flush=True)
    subprocess.run([sys.executable, "prepare.py"], cwd=folder, check=True, stdout=subprocess.DEVNULL)


def parse_log(text: str, ascii_corpus: bool = True) -> dict[str, Any]:
    """nanoGPT's printed log -> a history (one row per evaluation: step, wall_s, val_loss, train_loss) and
    figures. nanoGPT times each iteration from the end of the previous one, so an iteration that evaluates
    first includes its evaluation: wall time at evaluation k is the sum of iteration times through iteration
    k, less that iteration's own training step (taken as the median of the iterations that did not
    evaluate). Training speed is the mean over those iterations only, as tinygpt's is its training time (its
    validations excluded) over its steps."""
    evals = {int(m[1]): (float(m[2]), float(m[3])) for m in map(EVAL_LINE.match, text.splitlines()) if m}
    iters = [(int(m[1]), float(m[3]) / 1000) for m in map(ITER_LINE.match, text.splitlines()) if m]
    tokens = [int(m[1].replace(",", "")) for m in map(TOKENS_LINE.match, text.splitlines()) if m]
    if not evals or not iters or not tokens:
        raise ValueError("no nanoGPT 'step N: ... val loss', 'iter N: ... time' or 'tokens per iteration' lines")
    training = [seconds for step, seconds in iters if step not in evals]
    step_s = statistics.median(training)
    history, elapsed = [], 0.0
    for step, seconds in iters:
        elapsed += seconds
        if step in evals:
            train_loss, val_loss = evals[step]
            history.append({"step": step, "wall_s": max(elapsed - step_s, 0.0), "val_loss": val_loss,
                            "train_loss": train_loss})
    last = history[-1]
    return {"history": history, "steps": last["step"], "val_loss": last["val_loss"], "wall_s": last["wall_s"],
            # Tiny Shakespeare is ASCII: a character is a byte, so bits per byte is nats / ln 2.
            "val_bpb": last["val_loss"] / math.log(2) if ascii_corpus else None,
            "params": sum(int(m[1].replace(",", "")) for m in map(PARAMS_LINE.match, text.splitlines()) if m),
            "tokens_per_s": tokens[0] * len(training) / sum(training),
            "ms_per_step": 1000 * sum(training) / len(training)}


def run(checkout: Path, corpus: Path, run_dir: Path, extra: list[str]) -> dict[str, Any]:
    """nanoGPT's CPU recipe (plus `extra` overrides, e.g. --max_iters=500) with run_dir as its out_dir."""
    prepare(checkout, corpus)
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "train.py", *CPU_RECIPE, *extra, f"--out_dir={run_dir.resolve()}"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, env={**os.environ,
                          "PYTHONUNBUFFERED": "1"})
    process_s = time.perf_counter() - start
    (run_dir / "nanogpt.log").write_text(done.stdout + done.stderr)
    if done.returncode:
        raise SystemExit(f"error: nanoGPT failed (exit {done.returncode}); its log: {run_dir / 'nanogpt.log'}")
    return {**parse_log(done.stdout, Path(corpus).read_bytes().isascii()), "process_s": process_s}


@torch.no_grad()
def window_loss(logits_of: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor, block: int,
                batch_size: int) -> float:
    """Mean next-token loss over every non-overlapping window of `block` tokens of `ids` (the column 'nanoGPT
    val', for nanoGPT's model and tinygpt's alike); logits_of maps inputs (B, T) to logits (B, T, V)."""
    count = (len(ids) - 1) // block
    inputs, targets = ids[:count * block].view(count, block), ids[1:count * block + 1].view(count, block)  # (N, T)
    total = sum(F.cross_entropy(logits_of(x).flatten(0, 1), y.flatten(), reduction="sum").item()
                for x, y in zip(inputs.split(batch_size), targets.split(batch_size)))
    return total / targets.numel()


def final_val_loss(checkout: Path, run_dir: Path, steps: int, batch_size: int = 256) -> float:
    """window_loss of nanoGPT's final model on its validation text (its val.bin), through nanoGPT's own
    model.py, where nanoGPT's log has only 20 random batches. NaN when it saved no ckpt.pt from the last step
    (its recipe saves only at an evaluation whose estimate improved: a run shorter than eval_interval saves none)."""
    if not (run_dir / "ckpt.pt").is_file():
        return float("nan")
    checkpoint = torch.load(run_dir / "ckpt.pt", map_location="cpu", weights_only=False)
    if checkpoint["iter_num"] != steps:
        return float("nan")
    spec = importlib.util.spec_from_file_location("nanogpt_model", checkout / "model.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    model = code.GPT(code.GPTConfig(**checkpoint["model_args"]))
    # A compiled run saves its weights under _orig_mod.
    model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in checkpoint["model"].items()})
    model.eval()
    ids = torch.from_numpy(np.fromfile(checkout / DATA / "val.bin", dtype=np.uint16).astype(np.int64))
    # Given targets (any), nanoGPT's forward returns every position's logits (B, T, V), not just the last.
    return window_loss(lambda x: model(x, x)[0], ids, checkpoint["model_args"]["block_size"], batch_size)
