"""Ctrl-C after a sweep has ended: joblib spends a few seconds ending its workers at exit, and a Ctrl-C there found
the running-jobs handler still installed."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from gpt.sweeps import parallel
from gpt.sweeps.parallel import JobsPerCore
from tests.test_launchers import sweep_config


def test_ctrl_c_after_the_sweep_ended_is_no_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    """It said running jobs would save for resume=true (there were none), then raised SystemExit inside the
    interpreter's shutdown: 'Exception ignored' with a traceback, and exit status 0."""
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    cfg = sweep_config("seed=0,1", f"hydra.sweep.dir={tmp_path}")
    before = signal.getsignal(signal.SIGINT)
    try:
        callback = JobsPerCore()
        callback.on_multirun_start(cfg)
        callback.on_multirun_end(cfg)
        os.kill(os.getpid(), signal.SIGINT)
        assert "Ctrl-C" not in capsys.readouterr().err
    finally:
        signal.signal(signal.SIGINT, before)
