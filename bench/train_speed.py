"""Training speed: tokens/s, median ms per step, peak memory and model FLOPs utilisation (against a
matrix-multiply peak measured in the same run), for LitGPT under Lightning and for the same model in a
plain PyTorch loop, so Lightning's overhead shows as a ratio. Defaults: nanoGPT's shakespeare_char CPU
recipe shapes (4 layers, 4 heads, 128 dims, context 64, batch 12, 65 characters).

    OMP_NUM_THREADS=1 python bench/train_speed.py
    OMP_NUM_THREADS=1 python bench/train_speed.py --corpus data/shakespeare/input.txt mlp=swiglu pos=rope
"""
from __future__ import annotations

import argparse
import resource
import shlex
import statistics
import sys
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
import yaml
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from gpt import GPT, ModelConfig  # noqa: E402
from gpt.data import RandomWindows  # noqa: E402
from gpt.lit import LitGPT  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="ModelConfig fields as Hydra-style field=value (model. prefix optional)")
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--steps", type=int, default=60, help="timed steps per loop, after --warmup")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--corpus", help="a UTF-8 text file trained on character by character (default: random tokens)")
    parser.add_argument("--matmul-size", type=int, default=1024, help="n of the n x n fp32 matmul timed as the peak")
    return parser.parse_args(argv)


def model_config(args: argparse.Namespace, vocab_size: int) -> ModelConfig:
    values = dict(layers=4, heads=4, dim=128, block_size=64, attention="mha", pos="learned", dropout=0.0)
    for override in args.overrides:
        key, _, value = override.partition("=")
        values[key.removeprefix("model.")] = yaml.safe_load(value)
    return ModelConfig.from_dict({**values, "vocab_size": vocab_size})


def tokens(args: argparse.Namespace) -> tuple[np.ndarray, int]:
    if args.corpus:
        text = Path(args.corpus).read_text(encoding="utf-8")
        chars = sorted(set(text))
        lookup = {c: i for i, c in enumerate(chars)}
        return np.array([lookup[c] for c in text], dtype=np.uint16), len(chars)
    return np.random.default_rng(0).integers(0, 65, 1_000_000, dtype=np.uint16), 65  # Tiny Shakespeare's size


def matmul_peak(n: int) -> float:
    """FLOP/s of an n x n fp32 matrix multiply on this process's threads (best of 5, CPU time)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        a @ b
        best = min(best, (time.process_time() - start) / torch.get_num_threads())
    return 2 * n ** 3 / best


def flops_per_token(cfg: ModelConfig, model: GPT) -> float:
    """Training FLOPs per token, PaLM's estimate: 6 per parameter (forward + backward) plus attention's
    12 * layers * dim * context; position tables are lookups, not multiplies."""
    params = sum(p.numel() for name, p in model.named_parameters() if not name.startswith("pos."))
    return 6 * params + 12 * cfg.layers * cfg.dim * cfg.block_size


class StepClock(L.Callback):
    """Wall and CPU time between consecutive training-batch ends: a whole step, data loading included."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, float]] = []

    def on_train_batch_end(self, *args: object) -> None:
        self.marks.append((time.perf_counter(), time.process_time()))


def plain_loop(cfg: ModelConfig, data: RandomWindows, steps: int) -> list[tuple[float, float]]:
    """The same model, optimizer groups and clipping as LitGPT, with nothing around them."""
    torch.manual_seed(0)
    model = GPT(cfg).train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.95))
    marks, batches = [], iter(data)
    for _ in range(steps):
        inputs, targets = next(batches)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        marks.append((time.perf_counter(), time.process_time()))
    return marks


def lightning_loop(cfg: ModelConfig, data: RandomWindows, steps: int) -> list[tuple[float, float]]:
    torch.manual_seed(0)
    clock = StepClock()
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        gradient_clip_val=1.0, callbacks=[clock])
    trainer.fit(LitGPT(cfg, lr=1e-3, max_steps=steps),
                train_dataloaders=torch.utils.data.DataLoader(data, batch_size=None))
    return clock.marks


def report(name: str, marks: list[tuple[float, float]], warmup: int, tokens_per_step: int,
           flops_per_step: float, peak: float) -> float:
    """Print one row; return the median CPU seconds per step."""
    walls = [b[0] - a[0] for a, b in zip(marks[warmup:], marks[warmup + 1:])]
    cpus = [(b[1] - a[1]) / torch.get_num_threads() for a, b in zip(marks[warmup:], marks[warmup + 1:])]
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"{name:<12} {1000 * wall:>10.1f} {tokens_per_step / wall:>11.0f} {1000 * cpu:>10.1f} "
          f"{tokens_per_step / cpu:>11.0f} {100 * flops_per_step / cpu / peak:>7.1f} {rss:>14.0f}", flush=True)
    return cpu


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"command: python {shlex.join(sys.argv)}")
    ids, vocab_size = tokens(args)
    cfg = model_config(args, vocab_size)
    data = RandomWindows(ids, cfg.block_size, args.batch, seed=0)
    peak = matmul_peak(args.matmul_size)
    tokens_per_step = args.batch * cfg.block_size
    flops_per_step = flops_per_token(cfg, GPT(cfg)) * tokens_per_step
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {cfg.layers} layers, {cfg.heads} heads, "
          f"{cfg.dim} dims, context {cfg.block_size}, batch {args.batch}, vocab {vocab_size}, attention={cfg.attention}, "
          f"pos={cfg.pos}, mlp={cfg.mlp}; matmul peak {peak / 1e9:.1f} GFLOP/s on the threads "
          f"({args.matmul_size}^3 fp32); medians over {args.steps} steps after {args.warmup} warm-up steps")
    print("wall: elapsed time (stretched on a loaded machine); cpu: this process's CPU time per thread")
    print(f"{'loop':<12} {'wall ms':>10} {'wall tok/s':>11} {'cpu ms':>10} {'cpu tok/s':>11} {'MFU %':>7} "
          f"{'peak RSS MiB':>14}")
    steps = args.warmup + args.steps + 1
    plain = report("plain torch", plain_loop(cfg, data, steps), args.warmup, tokens_per_step, flops_per_step, peak)
    lit = report("lightning", lightning_loop(cfg, data, steps), args.warmup, tokens_per_step, flops_per_step, peak)
    print(f"lightning / plain time per step (cpu): {lit / plain:.3f}")


if __name__ == "__main__":
    main()
