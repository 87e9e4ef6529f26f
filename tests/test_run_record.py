"""What a run leaves for the report: KV-cache bytes per token, a NaN run marked failed, a stopped one marked
stopped, a crashed job recorded by the Hydra callback."""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from gpt import ModelConfig
from gpt.__main__ import main as cli
from gpt.sweeps.report import markdown
from gpt.sweeps.runs import find_runs
from gpt.sweeps.sweep_end import WriteReport
from gpt.inference.depth import tensor_bytes
from gpt.training.interrupts import StopOnInterrupt
from gpt.training.run_folder import finished, read_summary, record_failure, write_history, write_summary
from gpt.training.run_record import RunRecord, finished_line, kv_cache_bytes_per_token
from tests.conftest import build
from tests.fuzzing import scaled


def test_kv_bytes_per_token_counts_keys_and_values_of_every_layer(tiny_cfg: ModelConfig) -> None:
    model = build(tiny_cfg)
    assert kv_cache_bytes_per_token(model) == tiny_cfg.layers * 2 * tiny_cfg.dim * 4  # float32 keys + values
    assert kv_cache_bytes_per_token(model.to(torch.bfloat16)) == tiny_cfg.layers * 2 * tiny_cfg.dim * 2


def test_tensor_bytes_counts_a_shared_tensor_once() -> None:
    k = torch.zeros(2, 3)
    cache = SimpleNamespace(k=k, v=k, rest=[torch.zeros(4, dtype=torch.float16)], length=0)
    assert tensor_bytes(cache) == 6 * 4 + 4 * 2


def test_nan_validation_loss_stops_training_and_marks_the_run_failed(tmp_path: Path) -> None:
    record = RunRecord(tmp_path)
    trainer = SimpleNamespace(sanity_checking=False, global_step=3, should_stop=False, is_global_zero=True,
                              callback_metrics={"val/loss": torch.tensor(float("nan"))}, callbacks=[])
    record.on_validation_start(trainer, None)
    record.on_validation_end(trainer, None)
    assert trainer.should_stop
    record.on_train_end(trainer, None)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary == {"status": "failed", "reason": "val loss became nan at step 3"}
    history = (tmp_path / "history.csv").read_text().splitlines()
    assert history == ["step,wall_s,val_loss", f"3,{record.history[0]['wall_s']},nan"]


@pytest.mark.parametrize("sweep_stopped, how", [(False, "by Ctrl-C"), (True, "with its sweep")])
def test_a_stopped_run_is_recorded_as_stopped_not_failed(tmp_path: Path, sweep_stopped: bool, how: str) -> None:
    """Ctrl-C (or its sweep's stop) recorded the run as failed, with the stop as its reason; the report's row then
    read "failed" for a run nothing went wrong in."""
    stopper = StopOnInterrupt(lambda: sweep_stopped)
    trainer = SimpleNamespace(global_step=7, should_stop=False, is_global_zero=True, accumulate_grad_batches=1,
                              callbacks=[stopper], strategy=SimpleNamespace(reduce_boolean_decision=lambda x, all: x))
    stopper.requested = not sweep_stopped  # the first Ctrl-C's handler sets it
    stopper.on_train_batch_end(trainer, None, None, None, 0)
    RunRecord(tmp_path).on_train_end(trainer, None)
    assert read_summary(tmp_path) == {"status": "stopped", "reason": f"stopped {how} at step 7"}
    assert not finished(tmp_path)  # resume=true continues it


def test_a_job_that_raised_is_recorded_with_its_type_and_first_line(tmp_path: Path) -> None:
    config = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path / "7")}}})
    job = JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("CUDA out of memory.\nTried to allocate"))
    WriteReport().on_job_end(config, job)
    summary = json.loads((tmp_path / "7" / "summary.json").read_text())
    assert summary == {"status": "failed", "reason": "RuntimeError: CUDA out of memory."}


def test_a_resumed_run_continues_its_history_and_clock(tmp_path: Path) -> None:
    (tmp_path / "history.csv").write_text("step,wall_s,val_loss\n3,1.5,2.0\n6,3.0,1.8\n")
    record = RunRecord(tmp_path)
    trainer = SimpleNamespace(sanity_checking=False, global_step=3, should_stop=False, is_global_zero=True,
                              callback_metrics={"val/loss": torch.tensor(1.7)}, val_check_interval=3,
                              accumulate_grad_batches=1, max_steps=20)
    record.on_train_start(trainer, SimpleNamespace(device=torch.device("cpu")))  # resumed from step 3
    trainer.global_step = 5
    record.on_validation_start(trainer, None)
    record.on_validation_end(trainer, None)
    steps = [(row["step"], row["val_loss"]) for row in record.history]
    assert steps == [(3, 2.0), (5, pytest.approx(1.7))] and record.history[-1]["wall_s"] >= 1.5


def test_a_run_resumed_in_a_new_folder_goes_on_from_the_history_of_the_run_it_continues(tmp_path: Path) -> None:
    """resume=true on a single run trains on in a new folder: its history.csv and summary's wall s covered only the
    steps after the resume, so its curve started midway and its time looked short."""
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / "history.csv").write_text("step,wall_s,val_loss\n3,1.5,2.0\n6,3.0,1.8\n")
    trainer = SimpleNamespace(sanity_checking=False, global_step=6, should_stop=False, is_global_zero=True,
                              callback_metrics={"val/loss": torch.tensor(1.7)}, val_check_interval=3,
                              accumulate_grad_batches=1, max_steps=20)
    (tmp_path / "resumed").mkdir()
    record = RunRecord(tmp_path / "resumed", continues=tmp_path / "killed")
    record.on_train_start(trainer, SimpleNamespace(device=torch.device("cpu")))
    trainer.global_step = 9
    record.on_validation_start(trainer, None)
    record.on_validation_end(trainer, None)
    assert [row["step"] for row in record.history] == [3, 6, 9] and record.history[-1]["wall_s"] >= 3.0


def test_a_run_resumed_from_a_checkpoint_past_its_last_validation_keeps_the_time_of_the_steps_between(
        tmp_path: Path) -> None:
    """Checkpointed at step 8 after validating at 6 (callbacks.checkpoint.every_n_steps apart from
    trainer.val_check_interval): the resumed clock went on from the row of step 6, the time of steps 7 and 8 lost
    (a run resumed from step 60 after a row at 40 reported 11.8 s where the uninterrupted run took 12.8)."""
    (tmp_path / "history.csv").write_text("step,wall_s,val_loss\n3,1.5,2.0\n6,3.0,1.8\n")
    killed = RunRecord(tmp_path)
    killed.earlier_seconds, killed.start = 3.0, time.perf_counter() - 1.0  # 1 s of steps 7 and 8 since step 6
    saved = killed.state_dict()
    assert saved["wall_s"] == pytest.approx(4.0, abs=0.5)
    trainer = SimpleNamespace(sanity_checking=False, global_step=8, should_stop=False, is_global_zero=True,
                              callback_metrics={"val/loss": torch.tensor(1.7)}, val_check_interval=3,
                              accumulate_grad_batches=1, max_steps=20)
    record = RunRecord(tmp_path)
    record.load_state_dict(saved)
    record.on_train_start(trainer, SimpleNamespace(device=torch.device("cpu")))
    trainer.global_step = 9
    record.on_validation_start(trainer, None)
    record.on_validation_end(trainer, None)
    assert [row["step"] for row in record.history] == [3, 6, 9] and record.history[-1]["wall_s"] >= saved["wall_s"]


@pytest.mark.parametrize("limit", [0, 0.0])
def test_a_run_with_validation_off_says_so_in_its_summary_and_end_line(tmp_path: Path, tiny_cfg: ModelConfig,
                                                                        limit: float) -> None:
    """trainer.limit_val_batches=0 validates nowhere, the last step included: the run ended on a line without a val
    loss, and with a summary.json whose val loss was null unsaid, or, resumed from a run that had validated, the val
    loss of an earlier step as its final one."""
    (tmp_path / "history.csv").write_text("step,wall_s,val_loss\n3,1.5,2.0\n")
    trainer = SimpleNamespace(global_step=3, val_check_interval=3, accumulate_grad_batches=1, max_steps=6,
                              limit_val_batches=limit, is_global_zero=True, world_size=1, callbacks=[])
    module = SimpleNamespace(model=build(tiny_cfg), device=torch.device("cpu"))
    record = RunRecord(tmp_path)
    record.on_train_start(trainer, module)
    trainer.global_step = 6
    record.on_train_end(trainer, module)
    setting = f"trainer.limit_val_batches={limit}"
    summary = read_summary(tmp_path)
    assert summary["validation_off"] == setting and summary["val_loss"] is None
    line = finished_line(tmp_path)
    assert f", step 6, not validated ({setting}); model: " in line and "val loss" not in line


def test_a_kept_runs_line_says_its_time_is_training_time(tmp_path: Path) -> None:
    """A kept run's line gave summary.json's wall_s (its training) as "done in", the words the run's own last line
    used for the whole command's time (0m30s against 0m32s for one run): the same words for two measures."""
    (tmp_path / "history.csv").write_text("step,wall_s,val_loss\n10,30.4,2.0\n")
    (tmp_path / "summary.json").write_text(json.dumps({"status": "ok", "steps": 10, "wall_s": 30.4}))
    (tmp_path / "model.pt").write_bytes(b"")
    assert finished_line(tmp_path).startswith("trained in 0m30s, step 10, val loss 2.0000; model: ")


@pytest.mark.parametrize("resumed_at, max_steps, kept", [(11, 20, [5, 10]), (10, 20, [5, 10]), (7, 7, [5, 7])])
def test_a_resumed_run_drops_the_validation_its_stop_made_off_the_schedule(tmp_path: Path, resumed_at: int,
                                                                          max_steps: int, kept: list[int]) -> None:
    """Ctrl-C at step 11 validates there; the run resumed from that step would otherwise keep a row an
    uninterrupted run (validating every 5 steps) never has, and report it in loss.png and the ↑ test. The last
    step's validation is on the schedule wherever it falls."""
    rows = "".join(f"{step},{step / 10},1.0\n" for step in sorted({5, 10, resumed_at}))
    (tmp_path / "history.csv").write_text("step,wall_s,val_loss\n" + rows)
    trainer = SimpleNamespace(global_step=resumed_at, val_check_interval=5, accumulate_grad_batches=1,
                              max_steps=max_steps)
    record = RunRecord(tmp_path)
    record.on_train_start(trainer, SimpleNamespace(device=torch.device("cpu")))
    assert [row["step"] for row in record.history] == kept


@pytest.mark.parametrize("name, damage", [("summary.json", b'{"status": "o'), ("summary.json", b"[]"),
                                          ("history.csv", b"step,wall_s,val_loss\n5,0.5,2.0\n10,1.0"),
                                          ("history.csv", b"step,wall_s\n5,0.5,2.0,extra\n"),
                                          ("history.csv", b"step,wall_s\ninf,0.5\n"),  # OverflowError from int()
                                          ("history.csv", b""), ("history.csv", b"step,wall_s,val_loss\n"),
                                          ("history.csv", b"\0" * 200_000)])  # csv.Error: field larger than limit
def test_a_damaged_record_is_one_line_naming_it_and_a_failure_replaces_it(tmp_path: Path, name: str,
                                                                           damage: bytes) -> None:
    """resume=true reads both records first, and a sweep's report reads every job's: a record cut short by a
    disk fault was a JSONDecodeError naming no file, or a TypeError traceback."""
    write_summary(tmp_path, {"status": "ok", "steps": 10, "wall_s": 1.0})
    write_history(tmp_path, [{"step": 5, "wall_s": 0.5, "val_loss": 2.0}])
    (tmp_path / name).write_bytes(damage)
    with pytest.raises(ValueError, match=rf"^{tmp_path / name} is damaged \(.+\): delete it") as err:
        finished_line(tmp_path)
    assert "\n" not in str(err.value)
    if name == "summary.json":  # no finished run's record: a job failing in this folder records its failure
        record_failure(tmp_path, "boom")
        assert read_summary(tmp_path) == {"status": "failed", "reason": "boom"}


@pytest.mark.parametrize("key, value", [
    ("val_extrapolation", {"x": 1}),  # KeyError: 'lengths'
    ("val_extrapolation", {"trained": 8, "lengths": {"16": {"loss": 2.5}}}),  # KeyError: 'by_position', drawing
    ("val_levels", {"copy": {"4": {"exact": 0.5}, "8": {"exact": 0.5}}}),  # KeyError: 'tokens', drawing
], ids=["extrapolation", "extrapolation at a length", "levels"])
def test_a_summary_section_without_the_fields_the_report_draws_is_named_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture, key: str, value: object) -> None:
    """A section was checked only as a mapping: python -m gpt report, and the report a sweep writes when it ends,
    stopped with a KeyError traceback naming no file."""
    run = tmp_path / "0"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    (run / "summary.json").write_text(json.dumps({**FINISHED, key: value}))
    assert cli(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {run / 'summary.json'} is damaged (its {key} is " \
                                      f"{json.dumps(value)[:40]}): delete it (the run's checkpoints and model.pt " \
                                      "do not need it)\n"
    (run / "summary.json").write_text(json.dumps(FINISHED))  # as a run writes it: drawn
    assert cli(["report", str(tmp_path)]) == 0
    assert (tmp_path / "levels.png").exists() and (tmp_path / "extrapolation.png").exists()


def test_a_run_resumed_after_an_off_schedule_stop_keeps_the_time_before_the_stop(tmp_path: Path) -> None:
    """Ctrl-C at step 7 (validating every 5): the clock goes on from step 7's row, not from step 5's, else the
    report's wall s and loss.png's time axis lose the steps between them and the resumed job looks faster."""
    (tmp_path / "history.csv").write_text("step,wall_s,val_loss\n5,5.0,1.0\n7,13.0,1.0\n")
    trainer = SimpleNamespace(sanity_checking=False, global_step=7, should_stop=False, is_global_zero=True,
                              callback_metrics={"val/loss": torch.tensor(0.9)}, val_check_interval=5,
                              accumulate_grad_batches=1, max_steps=20)
    record = RunRecord(tmp_path)
    record.on_train_start(trainer, SimpleNamespace(device=torch.device("cpu")))
    trainer.global_step = 10
    record.on_validation_start(trainer, None)
    record.on_validation_end(trainer, None)
    assert [row["step"] for row in record.history] == [5, 10] and record.history[-1]["wall_s"] >= 13.0


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 10**20) | st.floats() | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
                    max_leaves=4)
FINISHED = {"status": "ok", "params": 100, "steps": 20, "val_loss": 3.5, "val_ppl": 33.1, "val_bpb": None,
            "tokens_per_s": 5e4, "ms_per_step": 9.0, "wall_s": 0.2, "peak_memory_bytes": 2**20,
            "kv_bytes_per_token": 128.0, "model": ModelConfig(vocab_size=37).to_dict(), "device": "cpu", "threads": 1,
            "val_acc": {"plus": 0.5, "all": 0.5}, "val_token_acc": {"plus": 0.7, "all": 0.7}, "val_prefix": {},
            "val_chance": {}, "val_levels": {"copy": {n: {"exact": 0.5, "token": 0.7, "prefix": 3.0, "tokens": 4.0,
                                                          "count": 2} for n in ("4", "8")}},
            "val_level_names": {"copy": "tokens"},
            "val_extrapolation": {"trained": 8, "lengths": {"16": {"loss": 2.5, "by_position": [2.0, 3.0], "bin": 8,
                                                                   "windows": 4}}, "refused": "pos=learned ..."}}


@given(key=st.sampled_from(sorted(FINISHED)), inner=st.none() | st.text(max_size=4), value=JSON)
@example(key="val_loss", inner=None, value="x")  # TypeError: can't multiply sequence by non-int of type 'float'
@example(key="val_acc", inner="plus", value="x")  # TypeError: must be real number, not str
@example(key="model", inner=None, value=5)  # TypeError: 'int' object is not iterable
@example(key="wall_s", inner=None, value=None)  # TypeError from round() in the line resume=true prints
@example(key="val_extrapolation", inner=None, value={"x": 1})  # KeyError: 'lengths'
@example(key="val_levels", inner="copy", value={"x": {}})  # ValueError from int(), naming no file
@example(key="val_acc", inner="plus", value=None)  # TypeError: must be real number, not NoneType
@example(key="params", inner=None, value=None)  # TypeError from the cost card's format
@settings(max_examples=scaled(100))
def test_a_summary_edited_into_other_values_is_read_or_refused_in_one_line(key: str, inner: str | None,
                                                                          value: object) -> None:
    """A summary.json that parses but holds a value of another kind (text for a number, a number for a section)
    reached the report's arithmetic as a TypeError traceback; one value of the summary, or of one of its sections,
    replaced by any JSON."""
    summary = json.loads(json.dumps(FINISHED))
    if inner is not None and isinstance(summary[key], dict):
        summary[key][inner] = value
    else:
        summary[key] = value
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder) / "0"
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
        (run / "summary.json").write_text(json.dumps(summary))
        try:
            finished_line(run)
            markdown(Path(folder), find_runs(Path(folder)))
        except ValueError as err:
            assert str(err).startswith(f"{run / 'summary.json'} is damaged (") and "\n" not in str(err), err
