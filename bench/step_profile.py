"""Where one training step's time goes, nanoGPT's own step against tinygpt's experiment=shakespeare_char_cpu on
this CPU: data, forward (with the loss), backward, gradient clipping, optimizer step and zero_grad, each timed
around the call (CPU ops are synchronous). nanoGPT's model and optimizer come from a checkout's own model.py
(GPT, configure_optimizers), nothing copied; tinygpt's from the preset as train.py composes it. Rounds alternate
the two loops so a machine that changes speed biases neither; each figure is the median over steps, then rounds.
What Lightning adds around tinygpt's step is Lightning's own profiler on a real run (printed as a command).

    python bench/step_profile.py --nanogpt ../nanoGPT --corpus input.txt
    OMP_NUM_THREADS=1 python bench/step_profile.py --nanogpt ../nanoGPT --corpus input.txt --steps 200 --rounds 3
"""
from __future__ import annotations

import argparse
import importlib.util
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

import nanogpt  # noqa: E402  (bench/nanogpt.py, beside this file)
from gpt.data.batches import RandomWindows  # noqa: E402
from gpt.data.shards import TokenShards  # noqa: E402
from gpt.model.config import ModelConfig  # noqa: E402
from gpt.model.gpt import GPT  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402
from gpt.training.optim import OPTIMIZERS, OptimConfig  # noqa: E402

PHASES = ("data", "forward", "backward", "clip", "optimizer", "zero_grad")
Step = Callable[[], dict[str, float]]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nanogpt", type=Path, required=True, help="a checkout of github.com/karpathy/nanoGPT")
    parser.add_argument("--corpus", type=Path, required=True, help="Tiny Shakespeare (trained character by character)")
    parser.add_argument("--steps", type=int, default=100, help="timed steps per loop and round, after --warmup")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if min(args.steps, args.rounds) < 1 or args.warmup < 0:
        parser.error("--steps and --rounds must be at least 1, --warmup at least 0")
    return args


def preset(vocab_size: int) -> tuple[ModelConfig, OptimConfig, int]:
    """shakespeare_char_cpu's model (over `vocab_size` characters), optimizer and batch size, composed as train.py
    composes them."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=shakespeare_char_cpu"])
    model = ModelConfig.from_dict({**OmegaConf.to_container(cfg.model, resolve=True), "vocab_size": vocab_size})
    optim = OptimConfig.from_dict({**OmegaConf.to_container(cfg.optim, resolve=True)})
    return model, optim, cfg.data.batch_size


def phased_step(batch: Callable[[], tuple[torch.Tensor, torch.Tensor]],
                loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], model: torch.nn.Module,
                optimizer: torch.optim.Optimizer) -> Step:
    """One training step with the time of each phase: data, forward (with the loss), backward, clip, step, zero."""
    def step() -> dict[str, float]:
        marks = [time.perf_counter()]
        x, y = batch()
        marks.append(time.perf_counter())
        loss = loss_of(x, y)
        marks.append(time.perf_counter())
        loss.backward()
        marks.append(time.perf_counter())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        marks.append(time.perf_counter())
        optimizer.step()
        marks.append(time.perf_counter())
        optimizer.zero_grad(set_to_none=True)
        marks.append(time.perf_counter())
        return {name: b - a for name, a, b in zip(PHASES, marks, marks[1:])}
    return step


def nanogpt_step(checkout: Path, ids: np.ndarray, model_cfg: ModelConfig, optim: OptimConfig, batch: int) -> Step:
    """nanoGPT's GPT and AdamW (its configure_optimizers on a CPU), fed random windows as its get_batch does."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", checkout / "model.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    torch.manual_seed(0)
    model = code.GPT(code.GPTConfig(n_layer=model_cfg.layers, n_head=model_cfg.heads, n_embd=model_cfg.dim,
                                    block_size=model_cfg.block_size, vocab_size=model_cfg.vocab_size, dropout=0.0,
                                    bias=False))
    optimizer = model.configure_optimizers(optim.weight_decay, optim.lr, tuple(optim.betas), "cpu")
    data, block = torch.from_numpy(ids.astype(np.int64)), model_cfg.block_size

    def windows() -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(len(data) - block, (batch,))
        return (torch.stack([data[i:i + block] for i in starts]),  # (B, T)
                torch.stack([data[i + 1:i + 1 + block] for i in starts]))  # (B, T)
    return phased_step(windows, lambda x, y: model(x, y)[1], model, optimizer)  # its forward returns the loss


def tinygpt_step(ids: np.ndarray, model_cfg: ModelConfig, optim: OptimConfig, batch: int) -> Step:
    """tinygpt's GPT and optimizer as LitGPT builds them (fused AdamW), fed by its own batch stream."""
    torch.manual_seed(0)
    model = GPT(model_cfg).train()
    optimizer = OPTIMIZERS[optim.name](model, optim, True)
    batches: Iterator = iter(RandomWindows(TokenShards([ids]), model_cfg.block_size, batch, seed=0))
    return phased_step(lambda: next(batches), lambda x, y: F.cross_entropy(model(x).flatten(0, 1), y.flatten()),
                       model, optimizer)


def median_phases(step: Step, steps: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        step()
    runs = [step() for _ in range(steps)]
    return {name: statistics.median(r[name] for r in runs) for name in PHASES}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    nanogpt.check_checkout(args.nanogpt)
    if not args.corpus.is_file():
        sys.exit(f"error: --corpus {args.corpus}: no such file")
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"CPU: {cpu_description()}; torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    text = args.corpus.read_text(encoding="utf-8")
    lookup = {c: i for i, c in enumerate(sorted(set(text)))}
    ids = np.array([lookup[c] for c in text[:int(0.9 * len(text))]], dtype=np.uint16)  # nanoGPT's train split
    # The vocabulary is the corpus's characters (65 in Tiny Shakespeare): a fixed 65 failed deep in an embedding on a
    # corpus of more.
    model_cfg, optim, batch = preset(len(lookup))
    if len(ids) <= model_cfg.block_size:
        sys.exit(f"error: --corpus {args.corpus}: its training 90% is {len(ids):,} characters, and a window of "
                 f"context {model_cfg.block_size} needs more: give a longer corpus (Tiny Shakespeare is 1.1M)")
    loops = {"nanoGPT": nanogpt_step(args.nanogpt, ids, model_cfg, optim, batch),
             "tinygpt": tinygpt_step(ids, model_cfg, optim, batch)}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in loops}
    for _ in range(args.rounds):
        for name, step in loops.items():
            rounds[name].append(median_phases(step, args.steps, args.warmup))
    print(f"ms per step, median over {args.steps} steps after {args.warmup} warm-up steps, then over {args.rounds} "
          f"alternated rounds; {model_cfg.layers} layers x {model_cfg.dim} dims, context {model_cfg.block_size}, "
          f"batch {batch}, fp32")
    print(f"{'loop':<9}" + "".join(f"{p:>11}" for p in PHASES) + f"{'sum':>9}{'tok/s':>9}")
    sums = {}
    for name, medians in rounds.items():
        phases = {p: statistics.median(m[p] for m in medians) for p in PHASES}
        sums[name] = sum(phases.values())
        print(f"{name:<9}" + "".join(f"{1000 * phases[p]:>11.2f}" for p in PHASES) +
              f"{1000 * sums[name]:>9.2f}{batch * model_cfg.block_size / sums[name]:>9.0f}")
    print(f"tinygpt's step against nanoGPT's: {sums['nanoGPT'] / sums['tinygpt']:.2f}x tokens/s on {cpu_description()}")
    print("Lightning around tinygpt's step (its profiler's table): python train.py experiment=shakespeare_char_cpu "
          f"data.path={args.corpus} trainer.max_steps=300 trainer.limit_val_batches=0 trainer.profiler=simple")


if __name__ == "__main__":
    main()
