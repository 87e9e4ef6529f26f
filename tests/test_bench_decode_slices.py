"""bench/decode_slices.py times what it says: its `slices` setting cuts a lone pair's keys, `uncut` does not, and
the kernel's own setting is back afterwards; it says on stderr what it is timing."""
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


@pytest.mark.parametrize("threads, depth, reason", [
    (2, 256, "too few keys (at most 304 in a step; two slices need 2,048)"),  # 256 + 2 settings x 24 steps
    (1, 2048, "threads already filled (1 (sequence, key/value head) pairs for 1 threads)"),
])
def test_a_row_whose_keys_were_not_cut_says_why_not_a_speed_up(
        threads: int, depth: int, reason: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """--depths 256 on 1 thread printed 'uncut/slices 1.13x': key_slices() gave 1 in both settings, so the same code
    ran twice and the ratio was noise presented as a speed-up."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    decode_slices.main(["--depths", str(depth), "--attention", "mqa", "--rounds", "1"])
    row = capsys.readouterr().out.splitlines()[-1]
    assert f"keys not cut here: {reason}, so both ran the same code" in row and "uncut/slices" not in row
    assert kernels.key_slices.__name__ == "key_slices"  # the recording wrapper is gone


def test_a_row_whose_keys_were_cut_keeps_its_ratio(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    decode_slices.main(["--depths", "2048", "--attention", "mqa", "--rounds", "1"])
    row = capsys.readouterr().out.splitlines()[-1]
    assert "uncut/slices" in row and "not cut" not in row


def test_each_prefill_and_round_says_on_stderr_that_it_starts(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture) -> None:
    """At its defaults (a prefill of 16k tokens for each variant, then 10 rounds) the bench printed nothing for
    minutes after its header. Its figures stay alone on stdout."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    decode_slices.main(["--depths", "256", "--attention", "mqa", "mla", "--rounds", "2"])
    out, err = capsys.readouterr()
    assert err.splitlines() == ["depth 256: prefilling mqa (1 of 2)...", "depth 256: prefilling mla (2 of 2)...",
                                "depth 256: timing round 1 of 2...", "depth 256: timing round 2 of 2..."]
    assert [line.split()[0] for line in out.splitlines()[-2:]] == ["mqa", "mla"] and "..." not in out
