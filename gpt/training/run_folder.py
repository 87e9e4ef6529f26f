"""What a training run leaves in its folder for the sweep report, whatever the logger: `history.csv` (one row per
validation) and `summary.json` (final numbers, or status "failed", "stopped", "refused" or "duplicate" with a
one-line reason). Written atomically here and read here, so the report (gpt/sweeps/) and the recorder (run_record.py)
share one contract. Which run holds the folder, and its removal when that run never began: run_folder_lock.py."""
from __future__ import annotations

import csv
import io
import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gpt.atomic import atomic_write
from gpt.model.config import ModelConfig
from gpt.validate import first_line, fits

SUMMARY = "summary.json"
HISTORY = "history.csv"
OVERRIDES = Path(".hydra") / "overrides.yaml"  # where Hydra records each job's command-line overrides
REPORT = "report.md"  # a sweep's, in its folder: written when the sweep ends
CHECKPOINT = "checkpoints/last.ckpt"  # the run's checkpoint to resume from, written at its end too
# Keys that say how to start a run, not what the run is: two runs differing only here are the same run.
NOT_IDENTITY = ("resume", "ckpt_path")


def a_number(value: Any) -> bool:
    """An int or a float, not a bool: what a settings field typed float takes."""
    return fits(value, float)


def a_count(key: str) -> bool:
    """Whether a section's key is a whole number (a level, an evaluation length), as the report reads it."""
    return key.isascii() and key.isdigit()


def mapping(check: Callable[[Any], bool], key: Callable[[str], bool] = lambda name: True) -> Callable[[Any], bool]:
    """Whether a value is a mapping whose every value `check` accepts, and every key `key` does."""
    return lambda value: isinstance(value, dict) and all(key(k) and check(v) for k, v in value.items())


def holding(fields: dict[str, Callable[[Any], bool]]) -> Callable[[Any], bool]:
    """Whether a value is a mapping holding every one of `fields`, each as its check accepts."""
    return lambda value: isinstance(value, dict) and all(name in value and check(value[name])
                                                         for name, check in fields.items())


def scores(value: Any) -> bool:
    """Whether a value is the scores of a task at a level (grading.mean_scores): numbers, those the report draws
    among them."""
    return holding(dict.fromkeys(["exact", "token", "prefix", "tokens"], a_number))(value) and \
        mapping(a_number)(value)


def an_extrapolation(value: Any) -> bool:
    """Whether a value is a val_extrapolation record (evaluation/extrapolation.py): the trained length, the loss,
    binned loss per position and bin width at each length scored, and the lengths refused, in words."""
    def by_position(losses: Any) -> bool:
        return isinstance(losses, list) and all(map(a_number, losses))

    at_length = holding({"loss": a_number, "bin": a_number, "by_position": by_position})
    return holding({"trained": a_number, "lengths": mapping(at_length, a_count)})(value) and \
        isinstance(value.get("refused", ""), str)


def a_model(values: dict[str, Any]) -> bool:
    """Whether `values` are a model config (the report's cost card builds one from them)."""
    try:
        ModelConfig.from_dict(values)
    except (TypeError, ValueError):
        return False
    return True


# What summary.json holds where (run_record.py writes it), so an edited one is named when read, not found by a
# TypeError or KeyError deep in the report: numbers, numbers per group, text, and sections with the fields the
# report reads.
SHAPES: dict[str, Callable[[Any], bool]] = {
    **dict.fromkeys(["steps", "val_loss", "val_ppl", "val_bpb", "tokens_per_s", "ms_per_step", "wall_s",
                     "peak_memory_bytes", "kv_bytes_per_token", "threads"], lambda value: value is None or
                    a_number(value)),
    "params": a_number,  # the cost card's arithmetic: every run has parameters
    **dict.fromkeys(["val_acc", "val_token_acc", "val_prefix", "val_tokens", "val_chance", "val_exact_chance"],
                    mapping(a_number)),
    "val_levels": mapping(mapping(scores, a_count)),
    **dict.fromkeys(["status", "reason", "device", "validation_off"], lambda value: isinstance(value, str)),
    "model": lambda value: isinstance(value, dict) and a_model(value),
    "val_level_names": lambda value: isinstance(value, dict),
    "val_extrapolation": an_extrapolation,
    # the ++ overrides its model reads nowhere: not part of what the run is (gpt/sweeps/repeats.py)
    "ignores": lambda value: isinstance(value, list) and all(isinstance(v, str) for v in value),
}


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(run_dir / SUMMARY, (json.dumps(summary, indent=2) + "\n").encode())


class Damaged(ValueError):
    """A run's record that cannot be read: a fault of the folder, not of the configuration (a sweep's job fails)."""


def damaged(path: Path, what: str) -> Damaged:
    """One line for a record that cannot be read (a disk fault, a hand edit): written atomically, it is never torn
    by a killed run, so only deleting it helps."""
    return Damaged(f"{path} is damaged ({what}): delete it (the run's checkpoints and model.pt do not need it)")


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / SUMMARY
    if not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text())
    except ValueError as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise damaged(path, first_line(err)) from None
    if not isinstance(summary, dict):
        raise damaged(path, "not a JSON object")
    wrong = next((key for key, check in SHAPES.items() if key in summary and not check(summary[key])), None)
    if wrong:
        raise damaged(path, f"its {wrong} is {json.dumps(summary[wrong])[:40]}")
    return summary


def finished(run_dir: Path) -> bool:
    """Whether the run in this folder finished: its summary says ok."""
    return (read_summary(run_dir) or {}).get("status") == "ok"


def whole_model(path: Path) -> bool:
    """Whether a model.pt (or a last.ckpt) is there and whole enough to keep: a zip holding torch's data.pkl. Emptied or
    cut short (its zip directory is at its end) it is not; its weights are not loaded, so a resumed sweep checks every
    job cheaply."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("/data.pkl") for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def kept_on_resume(run_dir: Path) -> bool:
    """Whether a resumed sweep keeps the run in this folder as it is: finished, with a whole model.pt (one killed
    before its model.pt, or whose model.pt is damaged, is finished from its final checkpoint)."""
    return finished(run_dir) and whole_model(run_dir / "model.pt")


def model_rebuildable(run_dir: Path) -> bool:
    """Whether the model of the run in this folder can be had: its model.pt is whole, or its last.ckpt is, which
    resume=true writes model.pt again from. Neither is a finished run that only training again brings back."""
    return whole_model(run_dir / "model.pt") or whole_model(run_dir / CHECKPOINT)


def record_failure(run_dir: Path, error: BaseException | str, refused: bool = False) -> None:
    """Mark a run failed (or, `refused`, as a configuration that cannot work) with a one-line reason, so the report
    shows it as such a row."""
    if isinstance(error, str):
        reason = error
    else:
        reason = (str(error).strip().splitlines() or [""])[0]
        if not isinstance(error, ValueError):  # a user error's message says it all; others need their type
            reason = f"{type(error).__name__}: {reason}".rstrip(": ")
    record_unfinished(run_dir, {"status": "refused" if refused else "failed", "reason": reason})


def record_stop(run_dir: Path, reason: str) -> None:
    """Mark a run stopped before its end (Ctrl-C, or its sweep's stop): not finished, so resume=true continues it, and
    not failed, since nothing went wrong."""
    record_unfinished(run_dir, {"status": "stopped", "reason": reason})


def record_duplicate(run_dir: Path, reason: str, ignores: list[str]) -> None:
    """Mark a sweep's job as the same run as another job's (`reason` names it), trained there: the report counts the
    run once."""
    record_unfinished(run_dir, {"status": "duplicate", "reason": reason, "ignores": ignores})


def record_unfinished(run_dir: Path, summary: dict[str, Any]) -> None:
    """Write the record of a run that did not finish here; a finished run's record is never replaced (a later attempt
    in its folder that fails leaves the results it had)."""
    try:
        done = finished(run_dir)
    except ValueError:  # a damaged record is no finished run's: this one replaces it
        done = False
    if done:
        print(f"kept the finished run's record in {run_dir}", file=sys.stderr)
        return
    write_summary(run_dir, summary)


def read_overrides(path: Path) -> list[str]:
    """A job's overrides (Hydra's .hydra/overrides.yaml), or one line naming the file when it is damaged: read as
    whatever it parses to, an emptied or edited one put its run in another configuration's row, or under none."""
    file = path / OVERRIDES
    try:
        overrides = yaml.safe_load(file.read_text())
    except (yaml.YAMLError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        what = first_line(err)
    else:  # Hydra writes a list, `[]` when there are none; each override sets (`key=value`) or deletes (`~key`)
        if isinstance(overrides, list) and all(isinstance(o, str) and ("=" in o or o.startswith("~"))
                                               for o in overrides):
            return overrides
        what = "not a list of overrides"
    raise ValueError(f"{file} is damaged ({what}): write it again from hydra.overrides.task in the hydra.yaml beside "
                     f"it, or delete {path}")


def write_history(run_dir: Path, rows: list[dict[str, float]]) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[-1]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(run_dir / HISTORY, text.getvalue().encode())


def read_history(run_dir: Path) -> list[dict[str, float]]:
    """history.csv's rows (one per validation), or none when the run never validated."""
    path = run_dir / HISTORY
    if not path.is_file():
        return []
    try:
        with open(path, newline="") as f:
            # A row cut short has None for its missing cells, one too long a list under the key None.
            rows = [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]
        history = [{**row, "step": int(row["step"])} for row in rows]  # written back as 50, not 50.0
    # UnicodeDecodeError is a ValueError; a step of inf an OverflowError; a line of over 128 KiB (a block of NULs)
    # a csv.Error
    except (ValueError, TypeError, KeyError, OverflowError, csv.Error):
        raise damaged(path, "a row is cut short, or holds something other than numbers") from None
    if not history:  # written with one row or more: a resumed run would start its history again, dropping them
        raise damaged(path, "it holds no row: emptied or cut short")
    return history
