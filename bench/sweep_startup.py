"""What a sweep job costs beyond its training: sweeps of one-step jobs (no validation) through a launcher, timed
whole. The first job pays the process start (Python, torch, Lightning imports); each further job pays its own
set-up (composing its config, the Trainer, data and model, the export): (wall of N jobs - wall of 1) / (N - 1).
Also the start-up of `python train.py --help`, the imports every train.py process pays before anything else.

    python bench/sweep_startup.py
    python bench/sweep_startup.py --jobs 8 --launchers basic cores
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

from gpt.machine import cpu_description  # noqa: E402
from gpt.training.composition import group_options  # noqa: E402
from gpt.validate import did_you_mean  # noqa: E402

# No validation, so no sample either: the calculator's sample is one whole line, whose length train.py sets itself.
ONE_STEP = ["trainer=debug", "trainer.max_steps=1", "trainer.limit_val_batches=0", "data.eval_lines=10"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=6, help="jobs of the longer sweep")
    parser.add_argument("--repeats", type=int, default=2, help="each measurement this many times (median)")
    parser.add_argument("--launchers", nargs="+", default=["basic", "cores"], help="hydra/launcher options")
    args = parser.parse_args(argv)
    if args.jobs < 2 or args.repeats < 1:  # a job after the first is what it measures
        parser.error("--jobs must be at least 2 and --repeats at least 1")
    # Checked here, against Hydra's own list (its plugins' launchers too) rather than a copy of it: a launcher Hydra
    # lacks was refused only by the first sweep through it, after train.py --help and every launcher before it.
    offered = group_options(ROOT / "configs", "hydra/launcher")
    if unknown := next((launcher for launcher in args.launchers if launcher not in offered), None):
        parser.error(f"--launchers {unknown} is not a hydra/launcher option: choose from {', '.join(offered)}"
                     f"{did_you_mean(unknown, offered)}")
    return args


def seconds(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # the caller's kept after it
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
    if done.returncode:
        raise SystemExit(f"error: {shlex.join(command)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def sweep_seconds(launcher: str, jobs: int, folder: Path) -> float:
    seeds = ",".join(str(s) for s in range(jobs))
    return seconds([sys.executable, str(ROOT / "train.py"), "-m", f"hydra/launcher={launcher}", *ONE_STEP,
                    f"seed={seeds}", f"hydra.sweep.dir={folder / f'{launcher}-{jobs}-{time.time_ns()}'}"], folder)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"CPU: {cpu_description()}, {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        help_s = statistics.median(seconds([sys.executable, str(ROOT / "train.py"), "--help"], folder)
                                   for _ in range(args.repeats))
        print(f"python train.py --help: {help_s:.2f} s (median of {args.repeats})")
        for launcher in args.launchers:
            one = statistics.median(sweep_seconds(launcher, 1, folder) for _ in range(args.repeats))
            many = statistics.median(sweep_seconds(launcher, args.jobs, folder) for _ in range(args.repeats))
            print(f"hydra/launcher={launcher}: 1 one-step job {one:.2f} s, {args.jobs} jobs {many:.2f} s; each job "
                  f"after the first {(many - one) / (args.jobs - 1):.2f} s (medians of {args.repeats})")


if __name__ == "__main__":
    main()
