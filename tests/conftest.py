"""Shared fixtures: a tiny seeded model config, and a helper to run the CLIs as a user would."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
import torch
from hypothesis import HealthCheck, settings

from gpt import GPT, ModelConfig
from gpt.data.tasks.calculator import Calculator
from gpt.data.tasks.datamodule import TaskData, task_tokenizer
from gpt.data.tokenizers.vocab import WordTokenizer
from gpt.sweeps.parallel import cores, job_threads

ROOT = Path(__file__).resolve().parents[1]

# The fuzz tests' cases (tests/test_fuzz_*.py): a fixed set in CI, the same every run; `--hypothesis-profile=long`
# draws ten times as many, new ones each run. Their max_examples are scaled by the profile's (100 = as written).
FUZZ = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.register_profile("ci", max_examples=100, derandomize=True, **FUZZ)
settings.register_profile("long", max_examples=1000, **FUZZ)
if settings.get_current_profile_name() == "default":  # not chosen with --hypothesis-profile
    settings.load_profile("ci")
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # pytest-xdist runs one test process per core (pyproject.toml's addopts): each gets its share of the cores, and
    # so do the scripts its tests start. With torch's default of every core in each, the suite took 12:36 on 2 cores
    # instead of 5:57.
    # The share a sweep's jobs get (an OMP_NUM_THREADS of the user's own is kept as there).
    THREADS = job_threads(int(os.environ["PYTEST_XDIST_WORKER_COUNT"]), cores())
    os.environ["OMP_NUM_THREADS"] = str(THREADS)
    torch.set_num_threads(THREADS)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in a script's background (`pytest &`), the suite ignored SIGINT and so did every run it started, which
    # then ignores Ctrl-C as it should: the Ctrl-C tests were of no terminal's run. Caught here, it starts them with
    # SIGINT at its default, as a run typed at a terminal is.
    signal.signal(signal.SIGINT, signal.default_int_handler)
WORDS = "thou art more lovely and temperate rough winds do shake the darling buds of may".split()


def play(lines: int = 300, seed: int = 0) -> str:
    """A small seeded text of short lines with punctuation, so every tokenizer has work to do."""
    rng = random.Random(seed)
    return "".join(" ".join(rng.choices(WORDS, k=rng.randint(3, 8))) + rng.choice([",", ".", "!", ""]) + "\n"
                   for _ in range(lines))


def calculator_data(batch_size: int = 256, operations: list[str] | None = None, seed: int = 0) -> TaskData:
    """The calculator as configs/data/calculator.yaml gives it to train.py (every problem of a split), with these
    settings."""
    return TaskData({"calculator": {"operations": operations}}, seed=seed, batch_size=batch_size, train_lines=None,
                    val_lines=None, eval_lines=500)


def calculator_tokenizer() -> WordTokenizer:
    """The calculator corpus's word tokenizer, as its data module builds it."""
    return task_tokenizer((Calculator(),))


@pytest.fixture
def tiny_cfg() -> ModelConfig:
    return ModelConfig(vocab_size=37, layers=2, heads=2, dim=32, block_size=16)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Models this small run fastest on one thread, and the machine's cores are shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def build(cfg: ModelConfig, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(cfg).eval()


# At init (std 0.02, zero biases, unit norm gains) attention scores are about 1e-4 and the softmax nearly uniform:
# two computations of the same function then agree whatever the scale, a bias, a gain, a mask edge or a rotation
# (a wrong MLA decode scale moved the logits by 1e-7). Drawn at this std, scores span several units.
OFF_INIT_STD = 0.5
Module = TypeVar("Module", bound=torch.nn.Module)


def off_init(model: Module, std: float = OFF_INIT_STD, seed: int = 0) -> Module:
    """`model` with every parameter (weights, biases, norm gains, embeddings) redrawn in place from a seeded
    N(0, std), so its attention is far from uniform; returned for chaining. Twins compared after a
    load_state_dict get the same draw."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():  # tied weights are one parameter, drawn once
            param.copy_(torch.randn(param.shape, generator=generator) * std)
    return model


def assert_close_scaled(actual: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """assert_close with `atol` counted in units of the largest |expected| (at least 1): off init, logits run to
    tens and gradients to hundreds, and float rounding grows with them, where at init both stay below 1."""
    scale = max(expected.detach().abs().max().item(), 1.0)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol * scale)


# 30 steps validated every 20: the last step falls between two intervals and must still validate.
TINY_RUN = ["trainer=debug", "trainer.max_steps=30", "trainer.val_check_interval=20", "model.layers=1",
            "model.dim=32", "model.heads=2", "data.batch_size=32", "data.eval_lines=10"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder under <tmp>/outputs trained once through the real CLI for every test that needs a trained
    calculator model; train.py's stdout is saved beside it as stdout.txt."""
    cwd = tmp_path_factory.mktemp("cli")
    result = run_cli("train.py", *TINY_RUN, "hydra.run.dir=outputs/run", cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    (cwd / "stdout.txt").write_text(result.stdout)
    return cwd / "outputs/run"


@contextmanager
def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The folder `name` of this test session, shared by its test processes and held under a file lock while the
    caller makes what it holds: under pytest-xdist the first process to need it makes it and the others wait for it."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this session's folder, above each test process's own
    folder = shared / name
    with FileLock(f"{folder}.lock"):
        yield folder


@pytest.fixture(scope="session")
def learned_calculator(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, dict[str, float]]:
    """The causal model of tests/test_learning.py (plus and minus, trained once per session; about 20 s):
    (its run folder holding model.pt, its final training loss, its held-out accuracy per operation). The README's
    Python snippet is run on it as well, since it answers held-out problems as the default run's model does.
    Under pytest-xdist the first test process to need it trains it and the others wait for it and load it."""
    from gpt.inference.checkpoint import save_model
    from tests.test_learning import OPERATIONS, train_and_grade

    with once_per_session(tmp_path_factory, "learned_calculator") as run_dir:
        record = run_dir / "scores.json"
        if not record.exists():
            loss, accuracy, text_model = train_and_grade(calculator_data(batch_size=128, operations=OPERATIONS))
            run_dir.mkdir(exist_ok=True)  # left empty by a training that failed in another test process
            save_model(run_dir / "model.pt", text_model.model, text_model.tokenizer, text_model.meta)
            record.write_text(json.dumps({"loss": loss, "accuracy": accuracy}))
    scores = json.loads(record.read_text())
    return run_dir, scores["loss"], scores["accuracy"]


# Runs of 30 steps, shorter than one validation interval: each must still validate (and grade) at its end. Jobs 0
# and 1 are pos=rope seed=0 at heads=3, which cannot build at dim 32, then at heads=2: a first job refused, the next
# trained.
REFUSING_SWEEP = ["trainer=debug", "trainer.max_steps=30", "trainer.val_check_interval=400", "model.layers=1",
                  "model.dim=32", "trainer.limit_val_batches=4", "data.eval_lines=10", "data.batch_size=64",
                  "logger=csv", "pos=rope,learned", "seed=0,1", "model.heads=3,2"]
JOBS_AT_ONCE = 2


@pytest.fixture(scope="session")
def refusing_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """REFUSING_SWEEP's sweep folder (its stderr beside it as stderr.txt), run once per session for
    tests/test_report.py and tests/test_first_hour.py: on Hydra's joblib launcher (the default), JOBS_AT_ONCE jobs at
    a time in worker processes, each given its share of the cores' threads by the launcher (so no OMP_NUM_THREADS of
    our own). Under pytest-xdist the first test process to need it runs it and the others wait for it. Tests that
    change its files work on a copy."""
    with once_per_session(tmp_path_factory, "refusing_sweep") as folder:
        if not (folder / "stderr.txt").exists():
            folder.mkdir(exist_ok=True)
            with pytest.MonkeyPatch.context() as env:
                env.delenv("OMP_NUM_THREADS", raising=False)
                result = run_cli("train.py", "-m", f"hydra.sweep.dir={folder / 'sweep'}",
                                 f"hydra.launcher.n_jobs={JOBS_AT_ONCE}", *REFUSING_SWEEP, cwd=folder)
            assert result.returncode == 0, result.stderr[-2000:]
            (folder / "stderr.txt").write_text(result.stderr)  # last: its presence says the sweep ended well
    return folder / "sweep"


def child_env(**extra: str) -> dict[str, str]:
    """This environment for a child process that imports the repository: the root put before any PYTHONPATH the
    caller set, not in its place (where the dependencies live on a PYTHONPATH, as on a GPU image, a child lost them)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


def run_cli(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run a repository script (train.py, generate.py, -m module) in `cwd`, offline, capturing output."""
    script = [args[0]] if args[0] == "-m" else [str(ROOT / args[0])]
    command = [sys.executable, *script, *args[1:]] if args[0] != "-m" else [sys.executable, *args]
    env = child_env(WANDB_MODE="offline", HYDRA_FULL_ERROR="0")
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def files_in(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes: compared before and after a refusal, which must change nothing."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def flip_a_bit_in(path: Path, member: str) -> None:
    """Flip one bit in the middle of the stored bytes of `member` of a zip file (a torch.save file), in place."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    raw = bytearray(path.read_bytes())
    name_and_extra = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little") + \
        int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")  # the local header's own
    raw[info.header_offset + 30 + name_and_extra + info.file_size // 2] ^= 1
    path.write_bytes(bytes(raw))


class CodeRunningPickle:
    """Unpickling this would create `marker`: a checkpoint payload that proves whether loading ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


BROWSERS: list[str] = []  # the browsers tests/test_viewer.py drove, for the summary line CI's log shows


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many command lines the fuzz tests tried, per entry point; which browser rendered the viewer."""
    from tests.conftest import BROWSERS as driven  # the module the tests import, not pytest's copy of this file
    from tests.fuzzing import CASES

    for browser in driven:
        terminalreporter.write_line(f"attention viewer: rendered and driven in {browser}")
    if CASES:
        entries = sorted({entry for entry, _ in CASES})
        counts = ", ".join(f"{e} {CASES[e, 'ran'] + CASES[e, 'refused']}: {CASES[e, 'ran']} ran, {CASES[e, 'refused']} "
                           "refused in one line" for e in entries)
        terminalreporter.write_line(f"fuzzing: {sum(CASES.values())} command lines tried ({counts})")
