"""`python -m gpt report <sweep folder> [--best-of KEY ...]`: write a sweep's report again (gpt/sweeps/report.py),
optionally keeping each configuration's best of the swept settings, and print it."""
from __future__ import annotations

import argparse

from gpt.sweeps.report import write_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep_dir", help="the sweep folder (hydra.sweep.dir), e.g. multirun/<date>/<time>")
    parser.add_argument("--best-of", nargs="+", default=[], metavar="KEY",
                        help="swept overrides (e.g. optim.lr) to keep only the best of per configuration, by held-out "
                             "exact match (else val loss) over seeds, as Zoology and MAD report models")


def run(args: argparse.Namespace) -> None:
    """`python -m gpt report`: write a sweep's report.md and its figures again, and print the report."""
    print(write_report(args.sweep_dir, args.best_of).read_text())
