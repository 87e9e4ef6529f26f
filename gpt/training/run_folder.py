"""What a training run leaves in its folder for the sweep report, whatever the logger: `history.csv` (one row per
validation) and `summary.json` (final numbers, or status "failed" with a one-line reason). Written atomically here
and read here, so the report (gpt/sweeps/) and the recorder (run_record.py) share one contract; and the folder of a
run that failed before it began removed again."""
from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from gpt.atomic import atomic_write

SUMMARY = "summary.json"
HISTORY = "history.csv"
HYDRA_RECORD = {".hydra", "train.log"}  # what Hydra writes into a run folder before the job starts
# Keys that say how to start a run, not what the run is: two runs differing only here are the same run.
NOT_IDENTITY = ("resume", "ckpt_path")


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(run_dir / SUMMARY, (json.dumps(summary, indent=2) + "\n").encode())


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / SUMMARY
    return json.loads(path.read_text()) if path.is_file() else None


def finished(run_dir: Path) -> bool:
    """Whether the run in this folder finished: its summary says ok."""
    return (read_summary(run_dir) or {}).get("status") == "ok"


def record_failure(run_dir: Path, error: BaseException | str) -> None:
    """Mark a run failed with a one-line reason, so the report shows it as a failed row; a finished run's record
    is never replaced (a later attempt in its folder that fails leaves the results it had)."""
    if finished(run_dir):
        print(f"kept the finished run's record in {run_dir}", file=sys.stderr)
        return
    if isinstance(error, str):
        reason = error
    else:
        reason = (str(error).strip().splitlines() or [""])[0]
        if not isinstance(error, ValueError):  # a user error's message says it all; others need their type
            reason = f"{type(error).__name__}: {reason}".rstrip(": ")
    write_summary(run_dir, {"status": "failed", "reason": reason})


def write_history(run_dir: Path, rows: list[dict[str, float]]) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[-1]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(run_dir / HISTORY, text.getvalue().encode())


def read_history(run_dir: Path) -> list[dict[str, float]]:
    """history.csv's rows (one per validation), or none when the run never validated."""
    if not (run_dir / HISTORY).is_file():
        return []
    with open(run_dir / HISTORY, newline="") as f:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


def discard_if_never_started(run_dir: Path) -> None:
    """Remove the folder Hydra made for a run that failed before writing anything of its own, and the date
    folder above it if that is left empty: failed configs leave no empty outputs/<date>/<time>/ behind."""
    cwd = Path.cwd().resolve()
    run_dir = run_dir.resolve()
    if run_dir == cwd or cwd.is_relative_to(run_dir) or not run_dir.is_dir():
        return
    own = [p for p in run_dir.rglob("*") if p.is_file() and p.relative_to(run_dir).parts[0] not in HYDRA_RECORD]
    if own:
        return
    shutil.rmtree(run_dir)
    for parent in run_dir.parents:
        if parent == cwd or not parent.is_relative_to(cwd) or any(parent.iterdir()):
            break
        parent.rmdir()
