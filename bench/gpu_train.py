"""GPU training speed of a GPT-2-small-sized model (12 layers, 12 heads, 768 dims, context 1024, GPT-2 BPE)
through train.py itself (`trainer=gpu`, bf16-mixed, `compile=true`) on a calculator corpus written here:
steady-state tokens/s and model FLOPs utilisation against the GPU's bf16 matrix-multiply peak measured in
the same run. Needs CUDA.

    python bench/gpu_train.py
    python bench/gpu_train.py --batch 16 --steps 200 model.attention=mha
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

from bench.train_speed import flops_per_token  # noqa: E402
from gpt.data.tasks.calculator import all_problems  # noqa: E402
from gpt.inference.checkpoint import load_checkpoint  # noqa: E402

# ++ as for every job of a sweep: a variant given after it that reads no heads or kernel (single_head, linear) is
# measured at this shape, not refused for a setting it ignores.
SHAPE = ["++model.layers=12", "++model.heads=12", "++model.dim=768", "++model.block_size=1024", "++model.kernel=sdpa"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="more train.py overrides, applied after the GPT-2-small shape")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50, help="steps left out of the median (compilation, autotuning)")
    parser.add_argument("--corpus-lines", type=int, default=400_000)
    parser.add_argument("--spec-peak", type=float, default=989e12, help="datasheet dense bf16 FLOP/s (H100/H200 SXM)")
    args = parser.parse_args(argv)
    # Checked before training: the median is taken after it, of the steps from --warmup on.
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--steps {args.steps} leaves no step after --warmup {args.warmup} to measure: give --steps "
                     "above --warmup")
    if args.batch < 1 or args.corpus_lines < 1:
        parser.error("--batch and --corpus-lines must be at least 1")
    return args


def write_corpus(path: Path, lines: int) -> None:
    """Calculator problems in words, one per line, shuffled: about 7 BPE tokens a line."""
    texts = [p.text for p in all_problems()]
    rng = random.Random(0)
    path.write_text("\n".join(rng.choice(texts) for _ in range(lines)) + "\n", encoding="utf-8")


def bf16_matmul_peak(n: int = 8192, repeats: int = 10) -> float:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return 2 * n ** 3 * repeats / (start.elapsed_time(end) / 1000)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"command: python {shlex.join(sys.argv)}")
    if not torch.cuda.is_available():
        sys.exit("error: bench/gpu_train.py times training on a GPU, and torch sees no CUDA device here: run it on a "
                 "GPU machine (bench/train_speed.py times the CPU)")
    with tempfile.TemporaryDirectory() as tmp:
        corpus, run = Path(tmp) / "calculator.txt", Path(tmp) / "run"
        write_corpus(corpus, args.corpus_lines)
        overrides = [*SHAPE, "trainer=gpu", "trainer.precision=bf16-mixed", "compile=true", "data=text",
                     f"data.path={corpus}", "data.tokenizer=gpt2", "data.compact_vocab=false",
                     f"data.batch_size={args.batch}", "data.val_windows=64", f"data.root={tmp}/data",
                     f"trainer.max_steps={args.steps}", f"trainer.val_check_interval={args.steps}",
                     "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "logger=csv",
                     f"hydra.run.dir={run}", *args.overrides]
        print("train.py " + " ".join(overrides), flush=True)
        subprocess.run([sys.executable, str(ROOT / "train.py"), *overrides], check=True, cwd=tmp)
        rows = list(csv.DictReader(next(run.glob("csv/*/metrics.csv")).read_text().splitlines()))
        rates = [float(r["train/tok_per_s"]) for r in rows
                 if r.get("train/tok_per_s") and int(r["step"]) >= args.warmup]
        model, _ = load_checkpoint(run / "model.pt")
        peak_memory = json.loads((run / "summary.json").read_text())["peak_memory_bytes"]
    cfg = model.cfg
    per_token = flops_per_token(cfg, model)
    tokens_per_s = statistics.median(rates)
    peak = bf16_matmul_peak()
    print(f"\n{torch.cuda.get_device_name()}; torch {torch.__version__}; {model.num_params():,} parameters; "
          f"{per_token / 1e9:.3f} GFLOP per token; batch {args.batch} x {cfg.block_size}")
    print(f"tokens/s (median of steps {args.warmup}..{args.steps}): {tokens_per_s:,.0f}")
    print(f"bf16 matmul peak measured here: {peak / 1e12:.0f} TFLOP/s; datasheet: {args.spec_peak / 1e12:.0f}")
    print(f"MFU: {100 * tokens_per_s * per_token / peak:.1f}% of the measured peak, "
          f"{100 * tokens_per_s * per_token / args.spec_peak:.1f}% of the datasheet's")
    print(f"peak GPU memory: {peak_memory / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
