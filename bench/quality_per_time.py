"""Quality per time: Tiny Shakespeare (char) validation loss against wall time, so configurations are
compared by what they reach in the same minutes. Each configuration is one string of train.py overrides;
they run one after another (never side by side: they would slow each other), alternated when repeated,
and the table gives medians over the repeats. Time to target: with --seeds 3, each configuration runs with
seeds 0, 1, 2 and the table gives the seconds until val loss first reached --target, mean ± std over seeds
(at validation resolution: pass trainer.val_check_interval= small enough).

    python bench/quality_per_time.py --corpus input.txt \
        experiment=shakespeare_char_cpu experiment=shakespeare_char_fast
    python bench/quality_per_time.py --corpus input.txt --repeats 2 --budget 117 \
        "experiment=shakespeare_char_fast" "experiment=shakespeare_char_fast optim=adamw"
    python bench/quality_per_time.py --corpus input.txt --seeds 3 --target 1.886 \
        experiment=shakespeare_char_cpu experiment=shakespeare_char_speedrun

Against real nanoGPT in the same run: --nanogpt <a nanoGPT checkout> runs its CPU Tiny Shakespeare recipe
(bench/nanogpt.py) as the first configuration, alternated with the others, and parses its log. Splits: nanoGPT
trains on the first 90% of the characters and validates on the last 10%; tinygpt trains on that same first
90% and validates on that same last 10% (data.val_path), so curves and times to target are on one text
(nanoGPT's figure: 20 random batches of 12 windows each time; tinygpt's: its data.val_windows fixed windows).
Each final model, nanoGPT's too (its ckpt.pt through its own model.py), is also measured on every window of the
last 10%: the column 'nanoGPT val'. nanoGPT has no seed option: with --seeds, every one of its runs uses its
fixed seed.

    python bench/quality_per_time.py --corpus input.txt --nanogpt ../nanoGPT --seeds 3 \
        --target 1.886 experiment=shakespeare_char_cpu experiment=shakespeare_char_fast \
        experiment=shakespeare_char_speedrun
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

import nanogpt  # noqa: E402  (bench/nanogpt.py, beside this file)
from gpt.inference.checkpoint import load_checkpoint  # noqa: E402
from gpt.sweeps.plots import loss_figure, styles  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402

NANOGPT = "nanoGPT (its CPU recipe)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help='one quoted string of train.py overrides per configuration')
    parser.add_argument("--corpus", required=True, help="Tiny Shakespeare's input.txt (or any text file)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of training wall time to compare at (default: the first configuration's own "
                             "training time in the same round, so a machine that slows down mid-run shifts both)")
    parser.add_argument("--target", type=float, default=1.70, help="val loss whose first crossing time is reported")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration, alternated A B A B")
    parser.add_argument("--seeds", type=int, default=1,
                        help="seeds 0..n-1 per configuration and repeat (time to target: mean ± std over them)")
    parser.add_argument("--out", default="bench_runs/quality_per_time", help="run folders, table and plot go here")
    parser.add_argument("--nanogpt", type=Path,
                        help="a nanoGPT checkout: run its CPU recipe as the first configuration")
    parser.add_argument("--nanogpt-args", default="",
                        help='extra nanoGPT overrides, after an equals sign: --nanogpt-args="--max_iters=500"')
    args = parser.parse_args(argv)
    if min(args.repeats, args.seeds) < 1:
        parser.error("--repeats and --seeds must be at least 1")
    return args


def run(overrides: list[str], data: list[str], run_dir: Path) -> dict[str, Any]:
    """Train one configuration on `data` (data.* overrides); return its validation history and figures."""
    command = [sys.executable, str(ROOT / "train.py"), *overrides, *data,
               "trainer.enable_progress_bar=false", "logger=none", f"hydra.run.dir={run_dir.resolve()}"]
    start = time.perf_counter()
    if code := subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL).returncode:  # its reason on stderr above
        raise SystemExit(f"error: train.py {shlex.join(overrides)} failed (exit {code})")
    process_s = time.perf_counter() - start
    with open(run_dir / "history.csv") as f:
        history = [{k: float(v) for k, v in row.items() if v} for row in csv.DictReader(f)]
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"history": history, "process_s": process_s, **summary}


def run_one(config: str, args: argparse.Namespace, data: list[str], held_out: str | None, seed: int,
            run_dir: Path) -> dict[str, Any]:
    """One configuration once: nanoGPT's recipe or train.py's overrides (measured on nanoGPT's val text too)."""
    if config == NANOGPT:  # nanoGPT has no seed option: every round runs its fixed seed (1337)
        result = nanogpt.run(args.nanogpt, Path(args.corpus), run_dir, shlex.split(args.nanogpt_args))
        return {**result, "nanogpt_val": nanogpt.final_val_loss(args.nanogpt, run_dir, result["steps"])}
    seeded = [*shlex.split(config), f"seed={seed}"] if args.seeds > 1 else shlex.split(config)
    result = run(seeded, data, run_dir)
    if held_out is not None:
        result["nanogpt_val"] = text_loss(run_dir / "model.pt", held_out)
    return result


def split_texts(corpus: Path, folder: Path) -> tuple[list[str], str]:
    """nanoGPT's split of the characters (its prepare.py's), written to two files: the data.* overrides that
    train tinygpt on the first 90% and validate it on the last 10%, and that last 10% as text."""
    text = corpus.read_text(encoding="utf-8")
    cut = int(len(text) * 0.9)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text(text[:cut], encoding="utf-8")
    (folder / "val.txt").write_text(text[cut:], encoding="utf-8")
    return [f"data.path={(folder / 'train.txt').resolve()}", f"data.val_path={(folder / 'val.txt').resolve()}"], \
        text[cut:]


def text_loss(model_path: Path, text: str, batch_size: int = 64) -> float:
    """Mean next-token loss of a model.pt over every non-overlapping window of its context in `text`."""
    model, tokenizer = load_checkpoint(model_path)
    return nanogpt.window_loss(model, torch.tensor(tokenizer.encode(text)), model.cfg.block_size, batch_size)


def at_budget(history: list[dict[str, float]], budget: float) -> float:
    """The val loss of the last evaluation finished within `budget` seconds (inf when none was)."""
    within = [row["val_loss"] for row in history if row["wall_s"] <= budget]
    return within[-1] if within else float("inf")


def crossing(history: list[dict[str, float]], target: float) -> float:
    """Seconds until val loss first reached `target` (inf when it never did)."""
    return next((row["wall_s"] for row in history if row["val_loss"] <= target), float("inf"))


def mean_std(seconds: list[float]) -> str:
    """'mean ± std s' of the runs' times to target; 'inf' when any run never reached it."""
    if not all(map(math.isfinite, seconds)):
        return f"inf ({sum(map(math.isfinite, seconds))}/{len(seconds)})"
    spread = f" ± {statistics.stdev(seconds):.1f}" if len(seconds) > 1 else ""
    return f"{statistics.fmean(seconds):.1f}{spread} s"


def table(results: dict[str, list[dict[str, Any]]], budgets: list[float], target: float,
          on_nanogpt_text: bool) -> list[str]:
    """The header and one row per configuration, medians over its runs. The 'nanoGPT val' column only when the
    runs were scored on nanoGPT's last 10% (--nanogpt): without it no run has that figure, so it would be all nan."""

    def median(config: str, key: str | Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(key(r) if callable(key) else r[key] for r in results[config])

    nanogpt_head = f" {'nanoGPT val':>11}" if on_nanogpt_text else ""
    lines = [f"{'configuration':<52} {'params':>9} {'steps':>6} {'ms/step':>7} {'tok/s':>7} {'train s':>8} "
             f"{'all s':>6} {'val loss':>8} {'bpb':>6}{nanogpt_head} {'at budget':>9} {f'to {target}':>14}"]
    for config, runs in results.items():
        bpb = median(config, lambda r: r.get("val_bpb") or float("nan"))
        nanogpt_cell = f" {median(config, 'nanogpt_val'):>11.4f}" if on_nanogpt_text else ""
        lines.append(
            f"{config:<52} {runs[0]['params']:>9,} {runs[0]['steps']:>6} {median(config, 'ms_per_step'):>7.1f} "
            f"{median(config, 'tokens_per_s'):>7.0f} {median(config, 'wall_s'):>8.1f} "
            f"{median(config, 'process_s'):>6.1f} {median(config, 'val_loss'):>8.4f} {bpb:>6.3f}{nanogpt_cell} "
            f"{statistics.median(at_budget(r['history'], b) for r, b in zip(runs, budgets)):>9.4f} "
            f"{mean_std([crossing(r['history'], target) for r in runs]):>14}")
    return lines


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not Path(args.corpus).is_file():
        sys.exit(f"error: --corpus {args.corpus}: no such file")
    out = Path(args.out)
    print(f"command: python {shlex.join(sys.argv)}", flush=True)
    print(f"CPU: {cpu_description()}, {torch.get_num_threads()} thread(s)", flush=True)
    configs, data, held_out = args.configs, [f"data.path={Path(args.corpus).resolve()}"], None
    if args.nanogpt:
        nanogpt.check_checkout(args.nanogpt)
        configs = [NANOGPT, *configs]
        data, held_out = split_texts(Path(args.corpus), out / "nanogpt_split")
    results: dict[str, list[dict[str, Any]]] = {config: [] for config in configs}
    rounds = [(repeat, seed) for repeat in range(args.repeats) for seed in range(args.seeds)]
    for repeat, seed in rounds:
        for index, config in enumerate(configs):
            result = run_one(config, args, data, held_out, seed, out / f"{index}-{repeat}-{seed}")
            results[config].append(result)
            print(f"  {config} (run {repeat + 1}, seed {seed}): val loss {result['val_loss']:.4f} after "
                  f"{result['steps']} steps, {result['wall_s']:.1f} s training, {result['process_s']:.1f} s in all, "
                  f"{crossing(result['history'], args.target):.1f} s to {args.target}", flush=True)

    first = results[configs[0]]
    budgets = [args.budget or run["wall_s"] for run in first]  # one per round
    budget_note = f"{args.budget:.0f} s" if args.budget else \
        f"the first configuration's training time in the same round ({', '.join(f'{b:.1f}' for b in budgets)} s)"
    print(f"\nmedians over {len(rounds)} run(s); 'at budget': the last evaluation within {budget_note}; "
          f"'to {args.target}': seconds to that val loss, mean ± std over runs (inf: some never reached it)")
    if args.nanogpt:
        print("val loss, at budget, time to target: on nanoGPT's last 10% (nanoGPT: 20 random batches each time; "
              "tinygpt: its fixed windows); 'nanoGPT val': the final model on every window of that text")
    print("\n".join(table(results, budgets, args.target, on_nanogpt_text=bool(args.nanogpt))))
    if args.nanogpt:
        for config in configs[1:]:  # per round, as the rounds alternate: a machine that changes speed biases none
            ratios = [t["tokens_per_s"] / n["tokens_per_s"] for n, t in zip(results[NANOGPT], results[config])]
            steps = [n["ms_per_step"] / t["ms_per_step"] for n, t in zip(results[NANOGPT], results[config])]
            print(f"training tokens/s against nanoGPT's, {config}: {statistics.median(ratios):.2f}x; steps/s "
                  f"{statistics.median(steps):.2f}x (medians over {len(ratios)} alternated round(s)) on "
                  f"{cpu_description()}")
    curves = {config: {"step": [row["step"] for row in runs[0]["history"]],
                       "wall_s": [row["wall_s"] for row in runs[0]["history"]],
                       "mean": [row["val_loss"] for row in runs[0]["history"]],
                       "std": [0.0] * len(runs[0]["history"])} for config, runs in results.items()}
    loss_figure(curves, styles(curves)).savefig(out / "quality_per_time.png")
    print(f"plot (first run of each): {out / 'quality_per_time.png'}")


if __name__ == "__main__":
    main()
