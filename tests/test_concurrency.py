"""Two processes at once on the same files: two training runs given one hydra.run.dir (one runs, the other refuses
in one line before writing anything), two sweeps given one hydra.sweep.dir (the second refuses while the first
lives), two preparations of one corpus (one prepares, the other waits and reads its
result), and a preparation killed while another waits (the waiting one prepares afresh). Real processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import gpt.sweeps.lock as sweep_lock
import gpt.training.run_folder_lock as run_folder_lock
from gpt.data.prepare import prepare
from gpt.data.prepared import open_prepared
from gpt.data.recipe import Recipe
from gpt.training.checks import check_config
from gpt.training.preflight import preflight
from tests.conftest import ROOT, child_env, play
from tests.fuzzing import CONFIGS
from tests.test_data import TINY

# `python -m gpt prepare`, marking in $MARKS when it waits for the corpus's lock and when it builds, and holding
# the lock for $HOLD seconds once it builds.
PREPARE = """
import os, sys, time
from pathlib import Path
import gpt.__main__ as cli, gpt.data.prepare as prepare
marks, real_build, real_locked = Path(os.environ["MARKS"]), prepare.build, prepare._locked
def locked(out):
    (marks / f"waits-{os.getpid()}").touch()
    return real_locked(out)
def build(*args, **kwargs):
    (marks / f"builds-{os.getpid()}").touch()
    time.sleep(float(os.environ.get("HOLD", "0")))
    return real_build(*args, **kwargs)
prepare._locked, prepare.build = locked, build
sys.exit(cli.main(["prepare", *sys.argv[1:]]))
"""


def preparer(corpus: Path, out: Path, marks: Path, hold: float = 0) -> subprocess.Popen:
    marks.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", PREPARE, str(corpus), "--out", str(out), "--doc-bytes", "256",
                             "--shard-tokens", "500", "--num-proc", "1"], cwd=ROOT, text=True,
                            env={**os.environ, "MARKS": str(marks), "HOLD": str(hold)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(path_glob: tuple[Path, str], timeout: float = 60) -> None:
    folder, pattern = path_glob
    deadline = time.monotonic() + timeout
    while not list(folder.glob(pattern)):
        assert time.monotonic() < deadline, f"no {pattern} in {folder}"
        time.sleep(0.01)


def shard_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.bin"))}


def test_two_preparations_of_one_corpus_prepare_it_once(tmp_path: Path) -> None:
    corpus, out, marks = tmp_path / "a.txt", tmp_path / "prepared", tmp_path / "marks"
    corpus.write_text(play(300))
    first, second = (preparer(corpus, out, marks, hold=1) for _ in range(2))
    results = [p.communicate(timeout=120) + (p.returncode,) for p in (first, second)]
    assert [code for _, _, code in results] == [0, 0], results
    assert len(list(marks.glob("builds-*"))) == 1 and len(list(marks.glob("waits-*"))) == 2
    assert results[0][0] == results[1][0] and "train with: python train.py data=text" in results[0][0]
    clean = prepare(Recipe([str(corpus)], doc_bytes=256, shard_tokens=500), tmp_path / "clean", 1)
    assert shard_bytes(out) == shard_bytes(clean) and not list(tmp_path.glob(".prepared.tmp-*"))


def test_a_preparation_killed_while_another_waits_is_prepared_afresh_by_the_waiting_one(tmp_path: Path) -> None:
    corpus, out, marks = tmp_path / "a.txt", tmp_path / "prepared", tmp_path / "marks"
    corpus.write_text(play(300))
    killed = preparer(corpus, out, marks, hold=600)
    wait_for((marks, "builds-*"))
    waiting = preparer(corpus, out, marks)
    wait_for((marks, f"waits-{waiting.pid}"))
    time.sleep(0.5)
    assert waiting.poll() is None  # blocked on the lock the first one holds
    assert len(list(tmp_path.glob(".prepared.tmp-*"))) == 1 and not out.exists()
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    stdout, stderr = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, stderr[-2000:]
    assert (marks / f"builds-{waiting.pid}").exists() and f"{out}:" in stdout
    assert not list(tmp_path.glob(".prepared.tmp-*"))  # the killed one's half-written folder is gone
    clean = prepare(Recipe([str(corpus)], doc_bytes=256, shard_tokens=500), tmp_path / "clean", 1)
    assert shard_bytes(open_prepared(out, "char").folder) == shard_bytes(clean)


def test_a_second_training_run_given_a_busy_run_folder_refuses_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_text(play(300))
    run = [sys.executable, str(ROOT / "train.py"), *TINY, "data.path=corpus.txt", "hydra.run.dir=runs/shared"]
    env = child_env(HYDRA_FULL_ERROR="0")
    shared = tmp_path / "runs" / "shared"
    first = subprocess.Popen([*run, "trainer.max_steps=100000", "seed=1"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # past its checks, its lock held, Hydra's record written (overrides.yaml last, after config.yaml is whole)
        wait_for((shared / ".hydra", "overrides.yaml"))
        first.send_signal(signal.SIGSTOP)  # paused, it holds the lock without training through the second's seconds
        config = (shared / ".hydra" / "config.yaml").read_bytes()
        second = subprocess.run([*run, "trainer.max_steps=5", "seed=2"], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=300)
        assert first.poll() is None, "the first run ended before the second one started"
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2 and second.stderr == "error: runs/shared is in use by another training run: wait " \
                                                       "for it to end, or pass another hydra.run.dir=\n"
    assert (shared / ".hydra" / "config.yaml").read_bytes() == config and b"seed: 1" in config


def test_the_processes_one_launcher_starts_share_the_run_folder_the_first_claims(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """torchrun, SLURM and Lightning's DDP start every rank with the same hydra.run.dir: one run, one claim. A
    second claim from this process is refused as another run's would be (flock: one holder per open file)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_folder_lock, "_held", [])
    argv = ["model.dim=64", "hydra.run.dir=runs/${model.dim}"]
    try:
        assert preflight(argv, CONFIGS, check_config, claim=True) == ["model.dim=64", "hydra.run.dir=runs/64"]
        with pytest.raises(SystemExit) as exit_:
            preflight(argv, CONFIGS, check_config, claim=True)
        assert exit_.value.code == 2 and capsys.readouterr().err == \
            "error: runs/64 is in use by another training run: wait for it to end, or pass another hydra.run.dir=\n"
        for rank in ("RANK", "LOCAL_RANK", "SLURM_PROCID"):
            with monkeypatch.context() as launched:
                launched.setenv(rank, "1")
                assert preflight(argv, CONFIGS, check_config, claim=True) == argv
    finally:
        for lock in run_folder_lock._held:
            lock.close()
    assert sorted(p.name for p in (tmp_path / "runs" / "64").iterdir()) == [".lock"]


def test_a_sweep_given_the_folder_a_live_sweep_runs_in_is_refused_and_one_killed_never_blocks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Two sweeps given one hydra.sweep.dir (two terminals, both with resume=true) both trained the same jobs into
    the same job folders. The first holds the folder's lock while its process lives: the second is refused in one
    line naming it; once the first is killed (SIGKILL, nothing of it cleaned up), the folder is free again."""
    monkeypatch.setattr(sweep_lock, "_held", [])
    folder = tmp_path / "sweep"
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(folder)}}})
    hold = "import sys, time; from pathlib import Path; from gpt.sweeps.lock import claim_sweep; " \
        "claim_sweep(Path(sys.argv[1])); print('held', flush=True); time.sleep(300)"
    first = subprocess.Popen([sys.executable, "-c", hold, str(folder)], env=child_env(), stdout=subprocess.PIPE,
                             text=True)
    try:
        assert first.stdout.readline() == "held\n"
        with pytest.raises(SystemExit) as exit_:
            sweep_lock.OneSweepPerFolder().on_multirun_start(config)
        assert exit_.value.code == 2 and capsys.readouterr().err == f"error: {folder} is in use by another sweep " \
            f"(process {first.pid}): wait for it to end, or pass another hydra.sweep.dir=\n"
    finally:
        first.kill()
        first.wait()
    try:
        sweep_lock.OneSweepPerFolder().on_multirun_start(config)
        assert (folder / sweep_lock.SWEEP_LOCK).read_text() == f"{os.getpid()}\n"
    finally:
        for lock in sweep_lock._held:
            lock.close()
