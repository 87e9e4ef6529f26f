"""Command lines drawn by Hypothesis, and the promise every one must keep: it runs, or it exits with status 2 and
exactly one line on stderr, no traceback. Keys come from the config files themselves, so a key added tomorrow
is fuzzed tomorrow; values are of every kind (well-typed, ill-typed, out of range, empty, odd)."""
from __future__ import annotations

import io
import math
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

import train
from gpt.training.composition import compose_train
from tests.conftest import ROOT

CONFIGS = ROOT / "configs"
PROGRESS_BAR = re.compile(r"\[\d+:\d\d[<,\]]")  # tqdm's: "encoding:  40%|####   | 2.00k/5.00k [00:01<00:02, ...]"
CASES: Counter[tuple[str, str]] = Counter()  # (entry point, ran or refused): pytest's terminal summary prints them


def scaled(examples: int) -> int:
    """A test's number of cases as written for the default profile ("ci", max_examples=100), scaled by the
    profile in use (--hypothesis-profile=long draws ten times as many)."""
    return examples * settings.default.max_examples // 100


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def call(entry: str | None, fn: Callable[[], object]) -> Outcome:
    """fn() in this process as its command line would run it: its exit status and what it printed. Any exception
    other than SystemExit escapes, and is what the fuzzing is looking for. Counted as a case of `entry` in the
    terminal summary's fuzzing line (None: a test's own command line, no fuzzing case)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            result = fn()
            code = result if isinstance(result, int) else 0  # preflight returns Hydra's command line
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    if entry is not None:
        CASES[entry, "ran" if code == 0 else "refused"] += 1
    return Outcome(code, out.getvalue(), err.getvalue())


def assert_clean(outcome: Outcome, argv: list[str]) -> None:
    """It ran (exit 0), or it refused in one line (exit 2); progress bars drawn before the refusal aside."""
    assert "Traceback" not in outcome.err, f"{argv}: {outcome.err[-2000:]}"
    if outcome.code != 0:
        lines = [line for line in outcome.err.splitlines() if line and not PROGRESS_BAR.search(line)]
        assert outcome.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
            f"{argv} exited {outcome.code} with stderr:\n{outcome.err[-2000:]}"


def group_options() -> dict[str, list[str]]:
    """Each config group (configs/<group>/, nested ones such as hydra/launcher too) and its options."""
    folders = sorted({p.parent for p in CONFIGS.glob("*/**/*.yaml")})
    return {folder.relative_to(CONFIGS).as_posix(): sorted(p.stem for p in folder.glob("*.yaml")) for folder in folders}


def leaves(node: Any, prefix: str) -> dict[str, Any]:
    """Every key under `node` (dotted, as a command line writes it) with its value in the file."""
    found = {}
    if isinstance(node, DictConfig):
        for key in node:
            if key in ("defaults", "hydra"):
                continue
            name = f"{prefix}.{key}" if prefix else str(key)
            found[name] = OmegaConf.to_container(node, resolve=False)[key]
            found.update(leaves(node._get_node(key), name))
    return found


@cache
def config_keys() -> dict[str, Any]:
    """Every key a command line can set, read from the config files (each group's package: `# @package`), with
    the value one of them gives it: train.yaml's own keys and each option's."""
    keys = leaves(OmegaConf.load(CONFIGS / "train.yaml"), "")
    for group, options in group_options().items():
        for option in options:
            path = CONFIGS / group / f"{option}.yaml"
            first = path.read_text().splitlines()[:1]
            package = first[0].split("@package", 1)[1].strip() if first and "@package" in first[0] else group
            keys.update({k: v for k, v in leaves(OmegaConf.load(path), "" if package == "_global_" else package)
                         .items() if k not in keys})
    return keys


ODD_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
HUGE = st.sampled_from([10**30, -10**30, 2**63, 2**64, 1e308, -1e308, 1e-320])
NON_FINITE = st.sampled_from(["nan", "inf", "-inf", "1e400", "-1e400"])
SCALARS = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False, width=32), st.booleans(),
                    st.just(None), HUGE)


def near(value: Any) -> st.SearchStrategy:
    """Values of the same type as `value`, near it (what a user means to type)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(max(0, value // 2), max(1, value * 2))
    if isinstance(value, float):
        return st.floats(0, max(1.0, value * 2), allow_nan=False)
    if isinstance(value, list):
        return st.lists(st.sampled_from(value), max_size=len(value), unique=True) if value else st.just([])
    return st.just(value)


def yaml(value: Any) -> str:
    """A Python value as Hydra's override grammar writes it (strings quoted, so any text is one value)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple, ListConfig)):
        return "[" + ",".join(yaml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{yaml(v)}" for k, v in value.items()) + "}"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def values(default: Any) -> st.SearchStrategy[str]:
    """The right side of `key=`: well-typed values near the default, other types, out of range, non-finite,
    empty, nested, sweeps of them, interpolations, and raw text (which Hydra's grammar may refuse)."""
    typed = near(default).map(yaml)
    other = SCALARS.map(yaml)
    nested = st.recursive(SCALARS, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "_target_"]), inner, max_size=2)),
        max_leaves=5).map(yaml)
    return st.one_of(
        typed, typed, other, nested, NON_FINITE, ODD_TEXT.map(yaml),
        st.sampled_from(["", "[]", "{}", "null", "'   '", "${model.dim}", "${nope}", "${oc.env:NOPE}", "???"]),
        st.lists(typed | other, min_size=2, max_size=3).map(",".join),  # a sweep
        ODD_TEXT,  # raw, unquoted
    )


def typo(key: str) -> st.SearchStrategy[str]:
    """`key` with one character dropped, doubled or swapped for a letter."""
    def edit(position: int, kind: int, letter: str) -> str:
        i = position % len(key)
        return [key[:i] + key[i + 1:], key[:i] + key[i] + key[i:], key[:i] + letter + key[i + 1:]][kind]
    return st.builds(edit, st.integers(0, 99), st.integers(0, 2), st.sampled_from("aeinost_."))


@st.composite
def override(draw: st.DrawFn, keys: dict[str, Any], groups: dict[str, list[str]]) -> str:
    """One override of train.py's command line."""
    kind = draw(st.sampled_from(["key", "key", "key", "group", "typo", "prefix", "delete"]))
    if kind == "group":
        group = draw(st.sampled_from(sorted(groups)))
        option = draw(st.sampled_from(groups[group]) | ODD_TEXT.filter(str.isidentifier) | st.just("null"))
        return f"{group}={option}"
    key = draw(st.sampled_from(sorted(keys)))
    default = keys[key]
    if kind == "typo":
        key = draw(typo(key))
    if kind == "delete":
        return f"~{key}" + draw(st.sampled_from(["", f"={yaml(default)}"]))
    prefix = draw(st.sampled_from(["+", "++"])) if kind == "prefix" else ""
    return f"{prefix}{key}={draw(values(default))}"


def command_lines(max_size: int = 4) -> st.SearchStrategy[list[str]]:
    """train.py command lines of a few overrides, sometimes a multirun."""
    lines = st.lists(override(config_keys(), group_options()), min_size=1, max_size=max_size)
    return st.tuples(st.sampled_from([[], [], [], ["-m"]]), lines).map(lambda pair: pair[0] + pair[1])


def clean_folder(path: Path) -> list[str]:
    """What a case left in a folder (a refused command line leaves nothing)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@contextmanager
def fresh_folder() -> Iterator[Path]:
    """An empty working folder for one case (Hypothesis runs many cases in one test, so no tmp_path)."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(before)


# What one step needs at most, whatever the command line asked for: one step, little validation and grading.
CAPS = {"trainer.max_steps": 1, "trainer.limit_val_batches": 1, "data.eval_lines": 8, "data.val_lines": 32,
        "data.val_windows": 8, "callbacks.sample.max_new_tokens": 4}


def job(argv: list[str], run_dir: Path, caps: dict[str, int] = CAPS,
        entry: str | None = "train.py one step") -> Outcome:
    """What Hydra's main then runs for `argv` (train.main's own body, its error path included), within `caps`."""
    cfg = compose_train(CONFIGS, argv)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(run_dir)
        for key, cap in caps.items():
            value = OmegaConf.select(cfg, key, default="absent")
            if value != "absent" and (value is None or value < 0 or value > cap):
                OmegaConf.update(cfg, key, cap)
        cfg.trainer.enable_progress_bar = False
    run_dir.mkdir(parents=True, exist_ok=True)  # as Hydra does before the job (train.py's preflight may have made it)
    HydraConfig.instance().set_config(cfg)
    try:
        return call(entry, lambda: train.main.__wrapped__(cfg))
    finally:
        HydraConfig.instance().cfg = None
