"""Training speed of model.kernel=math against model.kernel=sdpa: ms per step (forward, backward, AdamW) of the same
model, kernels alternated over rounds (A B A B), medians, in fp32 and under bf16 autocast, at the default
calculator run's shape and at text shapes (nanoGPT's shakespeare_char CPU recipe, and a longer context).

    python bench/kernel_speed.py                 # every shape, fp32 and bf16
    OMP_NUM_THREADS=1 python bench/kernel_speed.py --shapes calculator --rounds 5
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from gpt import GPT, ModelConfig  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402

# name -> (ModelConfig fields, batch): train.py's default run, shakespeare_char_cpu's model, and a 256 context
SHAPES = {
    "calculator": (dict(vocab_size=37), 256),
    "shakespeare_char_cpu": (dict(vocab_size=65, layers=4, block_size=64, norm="layernorm", mlp="gelu_exact",
                                  attention="mha_fused"), 12),
    "context_256": (dict(vocab_size=65, layers=4, block_size=256), 12),
}


def step_ms(cfg: ModelConfig, batch: int, bf16: bool, steps: int, warmup: int = 3) -> float:
    """Median ms of a training step after `warmup` steps."""
    torch.manual_seed(0)
    model = GPT(cfg).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size))
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(idx).flatten(0, 1), idx.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--steps", type=int, default=12, help="timed steps per kernel and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if min(args.steps, args.rounds) < 1:
        parser.error("--steps and --rounds must be at least 1")
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"CPU: {cpu_description()}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); ms per training step, median over "
          f"{args.rounds} alternated rounds of {args.steps} steps")
    for name in args.shapes:
        fields, batch = SHAPES[name]
        for bf16 in (False, True):
            times: dict[str, list[float]] = {"math": [], "sdpa": []}
            for _ in range(args.rounds):
                for kernel in times:
                    times[kernel].append(step_ms(ModelConfig(**fields, kernel=kernel), batch, bf16, args.steps))
            math, sdpa = (statistics.median(times[k]) for k in ("math", "sdpa"))
            ratio = statistics.median(m / s for m, s in zip(times["math"], times["sdpa"]))
            print(f"{name:<22} batch {batch:<4} {'bf16' if bf16 else 'fp32'}: math {math:7.1f} ms, sdpa {sdpa:7.1f} ms,"
                  f" sdpa {ratio:.2f}x as fast", flush=True)


if __name__ == "__main__":
    main()
