"""Training speed: tokens/s, median ms per step, peak memory and model FLOPs utilisation (against a
matrix-multiply peak measured in the same run) for LitGPT under Lightning and for the same model in a
plain PyTorch loop, so Lightning's overhead shows as a ratio; and, as the outside reference, nanoGPT's
model (LayerNorm, fused SDPA attention, GELU MLP, learned positions, fp32, per-tensor AdamW as nanoGPT uses
on a CPU) in the same plain loop. Rounds alternate reference, plain, Lightning (A B C A B C) and the ratios
are medians over rounds, so a machine that speeds up or slows down mid-run does not bias them. Defaults:
nanoGPT's shakespeare_char CPU recipe shapes (4 layers, 4 heads, 128 dims, context 64, batch 12).

    python bench/train_speed.py --corpus input.txt
    python bench/train_speed.py --corpus input.txt --precision bf16-mixed --compile attention=mha_fused
"""
from __future__ import annotations

import argparse
import resource
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
import yaml
from lightning.pytorch.loggers import CSVLogger
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from gpt import GPT, ModelConfig  # noqa: E402
from gpt.data.batches import RandomWindows  # noqa: E402
from gpt.data.shards import TokenShards  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402
from gpt.model.gpt import check_parts  # noqa: E402
from gpt.training.lit import LitGPT  # noqa: E402
from gpt.training.optim import OPTIMIZERS, SCHEDULES, OptimConfig  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*",
                        help="ModelConfig fields as Hydra-style field=value (model. prefix optional)")
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--steps", type=int, default=60, help="timed steps per loop and round, after --warmup")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="reference, plain, Lightning: alternated this many times")
    parser.add_argument("--corpus", help="a UTF-8 text file trained on character by character (default: random tokens)")
    parser.add_argument("--precision", default="32-true", choices=["32-true", "bf16-mixed"],
                        help="bf16-mixed: matrix multiplies in bfloat16 under autocast (CPUs with AVX512-BF16 or AMX)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (train.py's compile=true)")
    parser.add_argument("--matmul-size", type=int, default=1024, help="n of the n x n fp32 matmul timed as the peak")
    args = parser.parse_args(argv)
    if min(args.batch, args.steps, args.rounds, args.matmul_size) < 1 or args.warmup < 0:
        parser.error("--batch, --steps, --rounds and --matmul-size must be at least 1, --warmup at least 0")
    return args


def model_config(overrides: list[str], vocab_size: int) -> ModelConfig:
    values = dict(layers=4, heads=4, dim=128, block_size=64, attention="mha", pos="learned", dropout=0.0)
    for override in overrides:
        key, _, value = override.partition("=")
        values[key.removeprefix("model.")] = yaml.safe_load(value)
    cfg = ModelConfig.from_dict({**values, "vocab_size": vocab_size})
    check_parts(cfg)  # parts that do not suit each other (torch_mha with rope) were a traceback in the first loop
    return cfg


# nanoGPT's GPT in tinygpt's parts: the same arithmetic (fused QKV, one fused attention kernel call, GELU MLP,
# LayerNorm without bias).
NANOGPT = ["norm=layernorm", "attention=mha_fused", "mlp=gelu_exact", "pos=learned", "bias=false"]
NANOGPT_BATCH = 12  # with model_config's context 64: its CPU recipe
RECIPE = dict(name="adamw", lr=1e-3, min_lr=1e-4, betas=(0.9, 0.99), warmup_steps=100)  # its optimizer settings


def corpus_ids(args: argparse.Namespace) -> tuple[np.ndarray, int]:
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


def plain_loop(cfg: ModelConfig, data: RandomWindows, steps: int, precision: str, compile: bool,
               fused: bool = True) -> list[tuple[float, float]]:
    """The same model, optimizer groups, LR schedule and clipping as LitGPT, with nothing around them."""
    torch.manual_seed(0)
    model = GPT(cfg).train()
    if compile:
        model.compile()
    params = list(model.parameters())
    optim = OptimConfig(**RECIPE, max_steps=steps)
    optimizer = OPTIMIZERS[optim.name](model, optim, fused)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: SCHEDULES[optim.schedule](step, optim))
    marks, batches = [], iter(data)
    for _ in range(steps):
        inputs, targets = next(batches)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
            loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        schedule.step()
        marks.append((time.perf_counter(), time.process_time()))
    return marks


def lightning_loop(cfg: ModelConfig, data: RandomWindows, steps: int, precision: str,
                   compile: bool) -> list[tuple[float, float]]:
    torch.manual_seed(0)
    clock = StepClock()
    with tempfile.TemporaryDirectory() as logs:  # a CSV logger writing every 25 steps, as train.py's default
        trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=CSVLogger(logs),
                            log_every_n_steps=25, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, limit_val_batches=0, gradient_clip_val=1.0,
                            callbacks=[clock], precision=precision)
        trainer.fit(LitGPT(cfg, compile=compile, **RECIPE, max_steps=steps),
                    train_dataloaders=torch.utils.data.DataLoader(data, batch_size=None))
    return clock.marks


def step_seconds(marks: list[tuple[float, float]], warmup: int) -> tuple[float, float]:
    """Median (wall, CPU-per-thread) seconds per step after `warmup` steps."""
    pairs = list(zip(marks[warmup:], marks[warmup + 1:]))
    return (statistics.median(b[0] - a[0] for a, b in pairs),
            statistics.median((b[1] - a[1]) / torch.get_num_threads() for a, b in pairs))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.corpus and not Path(args.corpus).is_file():
        sys.exit(f"error: --corpus {args.corpus}: no such file")
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"CPU: {cpu_description()}")
    ids, vocab_size = corpus_ids(args)
    if not len(ids):  # its vocabulary was then "vocab_size=0 must be a positive integer"
        sys.exit(f"error: --corpus {args.corpus} is empty: give a text to train on")
    try:
        cfg, reference_cfg = model_config(args.overrides, vocab_size), model_config(NANOGPT, vocab_size)
    except ValueError as err:  # an unknown field or value, named with the known ones
        sys.exit(f"error: {err}")
    # One window of the longer context and its next token must fit: a shorter corpus failed in torch's random_ ("from=0
    # >= to=-52").
    if len(ids) <= max(cfg.block_size, reference_cfg.block_size):
        sys.exit(f"error: --corpus {args.corpus} holds {len(ids):,} characters, and a window of context "
                 f"{max(cfg.block_size, reference_cfg.block_size)} needs more: give a longer corpus")
    peak = matmul_peak(args.matmul_size)
    tokens_per_step = args.batch * cfg.block_size
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {cfg.layers} layers, {cfg.heads} heads, "
          f"{cfg.dim} dims, context {cfg.block_size}, batch {args.batch}, vocab {vocab_size}; matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s on the threads ({args.matmul_size}^3 fp32); medians over {args.steps} steps "
          f"after {args.warmup} warm-up steps, {args.rounds} alternated rounds")
    print(f"tinygpt: attention={cfg.attention}, pos={cfg.pos}, norm={cfg.norm}, mlp={cfg.mlp}, qk_norm={cfg.qk_norm}, "
          f"precision {args.precision}{', compiled' if args.compile else ''}, fused AdamW")
    print(f"nanoGPT reference: {' '.join(NANOGPT)}, fp32, per-tensor AdamW, plain loop")
    steps = args.warmup + args.steps + 1
    reference_data = RandomWindows(TokenShards([ids]), reference_cfg.block_size, NANOGPT_BATCH, seed=0)
    data = RandomWindows(TokenShards([ids]), cfg.block_size, args.batch, seed=0)
    loops = {"nanoGPT ref": lambda: plain_loop(reference_cfg, reference_data, steps, "32-true", False, fused=False),
             "plain torch": lambda: plain_loop(cfg, data, steps, args.precision, args.compile),
             "lightning": lambda: lightning_loop(cfg, data, steps, args.precision, args.compile)}
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in loops}
    for _ in range(args.rounds):
        for name, loop in loops.items():
            timings[name].append(step_seconds(loop(), args.warmup))
    tokens = {"nanoGPT ref": NANOGPT_BATCH * reference_cfg.block_size, "plain torch": tokens_per_step,
              "lightning": tokens_per_step}
    flops = {name: n * flops_per_token(c, GPT(c)) for (name, n), c in zip(tokens.items(), (reference_cfg, cfg, cfg))}
    print("wall: elapsed time (stretched on a loaded machine); cpu: this process's CPU time per thread; "
          "MFU against the fp32 peak; each figure the median over rounds")
    print(f"{'loop':<12} {'wall ms':>10} {'wall tok/s':>11} {'cpu ms':>10} {'cpu tok/s':>11} {'MFU %':>7}")
    for name, rounds in timings.items():
        wall, cpu = statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)
        print(f"{name:<12} {1000 * wall:>10.1f} {tokens[name] / wall:>11.0f} {1000 * cpu:>10.1f} "
              f"{tokens[name] / cpu:>11.0f} {100 * flops[name] / cpu / peak:>7.1f}")

    def ratio(a: str, b: str, i: int) -> float:
        """Median over rounds of b's tokens/s over a's (index 0: wall time, 1: CPU time)."""
        return statistics.median((tokens[b] / y[i]) / (tokens[a] / x[i]) for x, y in zip(timings[a], timings[b]))

    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"lightning / plain time per step: {ratio('lightning', 'plain torch', 1):.3f} (cpu), "
          f"{ratio('lightning', 'plain torch', 0):.3f} (wall)")  # equal tokens per step: the time ratio
    print(f"tokens/s vs the nanoGPT reference: lightning {ratio('nanoGPT ref', 'lightning', 1):.2f}x (cpu), "
          f"{ratio('nanoGPT ref', 'lightning', 0):.2f}x (wall); "
          f"plain {ratio('nanoGPT ref', 'plain torch', 1):.2f}x (cpu); on {cpu_description()}")


if __name__ == "__main__":
    main()
