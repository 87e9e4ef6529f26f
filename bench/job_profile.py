"""Where one training step of a sweep job goes: a preset's model, optimizer and batches as train.py composes them
(experiment=attention_tasks by default, plus one job's overrides) in a plain loop on one thread, as a sweep's job
runs beside the others, in the precision the job trains in; then the step's median time and torch.profiler's
costliest ops per step. Lightning around the step is its own profiler on a real job (printed as a command).

    python bench/job_profile.py                                  # attention=mha, the preset's precision
    python bench/job_profile.py attention=mqa trainer.precision=32 --top 30
"""
from __future__ import annotations

import argparse
import contextlib
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.profiler import profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

from gpt.machine import cpu_description  # noqa: E402
from gpt.training.composition import compose_train, parsed  # noqa: E402
from gpt.training.config_errors import explain  # noqa: E402
from gpt.training.lit import LitGPT  # noqa: E402
from gpt.training.model_settings import model_config  # noqa: E402
from gpt.training.optim import OPTIMIZERS  # noqa: E402
from gpt.training.precision import resolve_precision  # noqa: E402

CONFIGS = ROOT / "configs"


def count(least: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `least`."""
    def parse(text: str) -> int:
        value = int(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is below {least}")
        return value
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="train.py overrides of one job (default attention=mha)")
    parser.add_argument("--preset", default="attention_tasks", help="an experiment= whose job to profile")
    parser.add_argument("--steps", type=count(1), default=100, help="timed steps after --warmup")
    parser.add_argument("--warmup", type=count(0), default=20)
    parser.add_argument("--top", type=count(0), default=20, help="how many ops to list")
    return parser.parse_args(argv)


def job_step(preset: str, overrides: list[str]) -> tuple[Callable[[], torch.Tensor], str, str]:
    """One job's training step (forward and loss, backward, clipping, optimizer, zero_grad) on its own batches,
    returning the loss; the precision it trains in; the job's description."""
    overrides = [f"experiment={preset}", *(overrides or ["attention=mha"])]
    # Hydra's answer was its own "Ambiguous value for argument 'attention=mqa,gqa'"
    if sweep := next((o.input_line for o in parsed(overrides) if o.is_sweep_override()), None):
        raise ValueError(f"{sweep} is a sweep, and this profiles one job: give one value (run it once per value)")
    try:
        cfg = compose_train(CONFIGS, overrides)
    except HydraException as err:  # Hydra's several lines, as train.py words them in one
        raise ValueError(explain(err, CONFIGS, overrides)) from None
    data = instantiate(cfg.data)
    data.setup("fit")
    torch.manual_seed(cfg.seed)
    lit = LitGPT(model_config(cfg, data.vocab_size), **OmegaConf.to_container(cfg.optim, resolve=True)).train()
    optimizer = OPTIMIZERS[lit.optim.name](lit.model, lit.optim, True)  # as LitGPT builds it (fused AdamW)
    precision = resolve_precision(str(cfg.trainer.precision), "cpu")
    if precision not in ("32", "32-true", "bf16", "bf16-mixed"):
        raise ValueError(f"trainer.precision={precision}: a CPU job trains in 32 or bf16-mixed (or auto)")
    batches = iter(data.train_set)
    bf16 = precision.startswith("bf16")

    def step() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            loss = lit.loss(next(batches))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lit.parameters(), cfg.trainer.gradient_clip_val)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()
    return step, precision, " ".join(overrides)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    print(f"command: python {shlex.join(sys.argv)}")
    try:
        step, precision, job = job_step(args.preset, args.overrides)
    except ValueError as err:
        sys.exit(f"error: {err}")
    print(f"CPU: {cpu_description()}; torch {torch.__version__}, 1 thread; {job}; {precision}")
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(f"step: {1000 * statistics.median(times):.2f} ms (median of {args.steps} after {args.warmup} warm-up steps)")
    profiled = 30
    with profile(record_shapes=True) as prof:
        for _ in range(profiled):
            step()
    events = sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
    print(f"costliest ops by self CPU time, per step (mean of {profiled} profiled steps; the profiler adds its own):")
    for event in events[:args.top]:
        print(f"  {1e-3 * event.self_cpu_time_total / profiled:7.3f} ms  {event.count // profiled:4d} calls  "
              f"{event.key:<34} {str(event.input_shapes)[:70]}")
    print(f"Lightning around the step: python train.py experiment={args.preset} hydra.mode=RUN "
          f"{' '.join(args.overrides or ['attention=mha'])} trainer.profiler=simple")


if __name__ == "__main__":
    main()
