"""Sweep jobs that would repeat another job's run. `-m attention=mha,sliding_window ++model.window=4,8` makes two mha
jobs that differ only in a setting no part of mha reads: the same run twice. The job at the setting's first swept
value runs; the others are recorded as its duplicates without training, and the report counts the run once."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import OmegaConf

from gpt.overrides import override_key
from gpt.sweeps.parallel import command_line_values
from gpt.training.composition import sweep_overrides
from gpt.training.recorded import as_typed

MULTIRUN_RECORD = "multirun.yaml"  # Hydra writes the sweep's config into its folder before the first job starts


def recorded_sweep(sweep_dir: Path) -> list[str]:
    """The sweep's overrides as its sweeper read them (sweep_overrides), from its folder; none where none is recorded
    (a folder made another way)."""
    path = sweep_dir / MULTIRUN_RECORD
    if not path.is_file():
        return []
    saved = OmegaConf.load(path)
    return sweep_overrides(OmegaConf.select(saved, "hydra.sweeper.params") or {},
                           as_typed(OmegaConf.select(saved, "hydra.overrides.task")))


def repeated(ignored: Sequence[str], sweep: Sequence[str],
             accepted: Callable[[str], bool] = lambda override: True) -> list[str]:
    """The job whose run this one repeats, as the overrides it has in place of this job's: `ignored` are this job's
    overrides that its model reads nowhere (`++model.window=8` beside attention=mha), and each one the `sweep` sweeps
    from another first value is that value (`++model.window=4`). A value `accepted` refuses on this job's model is
    passed over: its job is refused, not run (`++model.qk_norm=true` beside attention=torch_mha), so the next value's
    runs. None: this job is the one of them that runs."""
    values = command_line_values(list(sweep))
    first = []
    for override in ignored:
        written, value = override.split("=", 1)
        swept = [v for v in values.get(override_key(override), []) if v == value or accepted(f"{written}={v}")]
        if len(swept) > 1 and value != swept[0]:
            first.append(f"{written}={swept[0]}")
    return first
