"""bench/decode_slices.py times what it says: its `slices` setting cuts a lone pair's keys, `uncut` does not, and
the kernel's own setting is back afterwards."""
from __future__ import annotations

import sys

import pytest
import torch

import gpt.model.attention.kernels as kernels
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import decode_slices  # noqa: E402


def test_only_the_slices_setting_cuts_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    cut_under = []
    original = kernels.sliced_keys_attention
    monkeypatch.setattr(kernels, "sliced_keys_attention",
                        lambda *args: cut_under.append(kernels.MIN_SLICE_KEYS) or original(*args))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)  # mqa's one pair leaves a thread idle
    times = decode_slices.step_times(["mqa"], depth=2048, batch=1, rounds=1)
    assert set(times) == {("mqa", "uncut"), ("mqa", "slices")} and all(len(t) == 1 for t in times.values())
    assert cut_under == [decode_slices.SETTINGS["slices"]] * decode_slices.STEPS * 4  # every step of its 4 layers
    assert kernels.MIN_SLICE_KEYS == decode_slices.SETTINGS["slices"]


def test_nothing_to_time_is_refused() -> None:
    with pytest.raises(SystemExit):
        decode_slices.parse_args(["--rounds", "0"])


def test_an_unknown_variant_is_refused_in_one_line(capsys: pytest.CaptureFixture) -> None:
    """--attention nope built every engine up to it, then ended in KeyError: 'nope'."""
    with pytest.raises(SystemExit):
        decode_slices.parse_args(["--attention", "mqa", "nope"])
    assert "invalid choice: 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("variant", ["linear", "torch_mha"])
def test_a_variant_that_reads_no_kernel_is_refused(variant: str, capsys: pytest.CaptureFixture) -> None:
    """--attention linear timed the same code twice and printed its noise as 'uncut/slices 1.07x', as if slicing
    sped up a variant that never calls the kernel that slices."""
    with pytest.raises(SystemExit):
        decode_slices.parse_args(["--attention", "mqa", variant])
    assert f"--attention {variant} never calls the softmax kernel" in capsys.readouterr().err
