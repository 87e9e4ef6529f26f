"""A sweep one job at a time against jobs side by side, on the same machine: the preset (by default
experiment=attention_tasks, 33 jobs) through hydra/launcher=basic with every core's threads in one job, then through
the default launcher (hydra/launcher=cores: one job per core, one thread each). Prints both wall times and whether the
two capability matrices agree within seed noise: per cell, the two runs' seeds differ by more than two standard errors
of the difference (Welch) only by chance.

    python bench/sweep_speed.py   # the whole preset, twice: about 16 minutes on 2 cores
    python bench/sweep_speed.py trainer.max_steps=200 trainer.val_check_interval=200 attention=mha,gqa seed=0,1  # smoke
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing

from gpt.sweeps import capability  # noqa: E402
from gpt.sweeps.parallel import cores  # noqa: E402
from gpt.sweeps.runs import find_runs, summaries  # noqa: E402
from gpt.sweeps.stats import beyond_noise  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="train.py overrides added to both sweeps")
    parser.add_argument("--preset", default="attention_tasks", help="an experiment= that sweeps")
    parser.add_argument("--out", type=Path, help="keep both sweep folders here (default: a temporary folder)")
    return parser.parse_args(argv)


def run_sweep(args: argparse.Namespace, folder: Path, launcher: list[str], threads: str | None) -> float:
    """Wall seconds of the whole sweep command (start-up, every job, the report)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    # The repository before any PYTHONPATH already set (where the dependencies may live), not in its place.
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update({"PYTHONPATH": path, **({"OMP_NUM_THREADS": threads} if threads else {})})
    command = [sys.executable, str(ROOT / "train.py"), f"experiment={args.preset}", *launcher, *args.overrides,
               f"hydra.sweep.dir={folder}"]
    print(f"$ {'OMP_NUM_THREADS=' + threads + ' ' if threads else ''}python {shlex.join(command[1:])}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=folder.parent, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: the sweep failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def disagreements(a: Path, b: Path) -> tuple[list[str], int, int, float]:
    """(the cells beyond seed noise, each with both means, cells compared, cells with one seed on a side, largest gap
    of means in points) between two sweeps' matrices. Named, because at the ceiling two seeds with no spread make 99.6
    against 100.0 count. A cell with one seed is not compared: beyond_noise() makes no claim on it."""
    runs_a, runs_b = summaries(find_runs(a)), summaries(find_runs(b))
    beyond, compared, one_seed, gap = [], 0, 0, 0.0
    for label in sorted(runs_a.keys() & runs_b.keys()):
        for column in capability.columns({label: runs_a[label]}):
            x, y = capability.values(runs_a[label], column), capability.values(runs_b[label], column)
            if x and y:
                gap = max(gap, abs(statistics.fmean(x) - statistics.fmean(y)))
                if len(x) < 2 or len(y) < 2:
                    one_seed += 1
                    continue
                compared += 1
                if beyond_noise(x, y, False) or beyond_noise(y, x, False):
                    beyond.append(f"{label} {column} {statistics.fmean(x):.1f} vs {statistics.fmean(y):.1f}")
    return beyond, compared, one_seed, gap


def verdict(beyond: list[str], compared: int, one_seed: int, gap: float) -> str:
    """The matrices' line: cells with one seed are counted apart, since no noise can be told from one seed."""
    largest = f"largest gap of means {gap:.1f} points"
    if not compared:
        if not one_seed:
            return "capability matrices: no cell is in both, nothing to compare"
        return (f"capability matrices: no cell could be compared (one seed each: give seed=0,1,2 or more to "
                f"compare); {largest}")
    rest = f"; {one_seed} {'has' if one_seed == 1 else 'have'} one seed" if one_seed else ""
    return (f"capability matrices: {len(beyond)} of {compared} cells compared differ beyond seed noise"
            f"{': ' if beyond else ''}{'; '.join(beyond)}{rest}; {largest}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"command: python {shlex.join(sys.argv)}")
    n = cores()
    print(f"CPU: {cpu_description()}, {n} cores")
    with tempfile.TemporaryDirectory() as tmp:
        # Absolute: each sweep runs in out, where a relative hydra.sweep.dir would land one folder deeper.
        out = (args.out or Path(tmp)).resolve()
        out.mkdir(parents=True, exist_ok=True)
        serial = run_sweep(args, out / "serial", ["hydra/launcher=basic"], str(n))
        parallel = run_sweep(args, out / "parallel", [], None)
        beyond, compared, one_seed, gap = disagreements(out / "serial", out / "parallel")
    print(f"one at a time, {n} threads: {serial / 60:.1f} min; {n} at a time, 1 thread each: {parallel / 60:.1f} min "
          f"(parallel {serial / parallel:.2f}x as fast) on {cpu_description()}")
    print(verdict(beyond, compared, one_seed, gap))


if __name__ == "__main__":
    main()
