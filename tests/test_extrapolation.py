"""Loss past the trained length: a model runs at a longer block with the same weights where its positions allow
(learned positions refuse past their table, with one line), scores windows per position, and a tiny sweep over
encodings records it for the report's table and extrapolation.png; `python -m gpt evaluate --lengths` prints it."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imread

from gpt.__main__ import main as cli
from gpt.evaluation.extrapolation import at_length, extrapolation, loss_by_position
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT
from gpt.sweeps import scaling
from tests.conftest import play, run_cli

CFG = ModelConfig(vocab_size=11, layers=2, heads=2, dim=16, block_size=8)


@pytest.mark.parametrize("pos", ["rope", "alibi", "none", "sinusoidal"])
def test_a_model_runs_past_its_block_with_the_same_weights(pos: str) -> None:
    torch.manual_seed(0)
    model = GPT(replace(CFG, pos=pos)).eval()
    longer = at_length(model, 32)
    assert longer.cfg.block_size == 32 and at_length(model, 8) is model
    idx = torch.randint(0, 11, (2, 32))
    torch.testing.assert_close(longer(idx[:, :8]), model(idx[:, :8]))  # the first block is the same model
    assert longer(idx).shape == (2, 32, 11)


def test_learned_positions_refuse_past_their_table_unless_drawn_from_a_longer_range() -> None:
    model = GPT(replace(CFG, pos="learned"))
    with pytest.raises(ValueError, match="pos=learned has learned positions for 8 tokens only") as err:
        at_length(model, 16)
    assert "\n" not in str(err.value)
    assert at_length(GPT(replace(CFG, pos="learned", random_positions=32)), 32).cfg.block_size == 32


@pytest.mark.parametrize("pos", ["rope", "sinusoidal"])
def test_drawn_positions_do_not_stop_an_encoding_that_runs_at_any_length(pos: str) -> None:
    """model.random_positions=16 at block 8: scored at 32 tokens, past the range positions were drawn from."""
    torch.manual_seed(0)
    model = GPT(replace(CFG, pos=pos, random_positions=16)).eval()
    longer = at_length(model, 32)
    idx = torch.randint(0, 11, (2, 32))
    torch.testing.assert_close(longer(idx[:, :8]), model(idx[:, :8]))
    assert longer.cfg.block_size == 32 and longer(idx).shape == (2, 32, 11)


def test_loss_by_position_averages_whole_windows_and_records_what_it_can() -> None:
    torch.manual_seed(0)
    model = GPT(replace(CFG, pos="learned"))
    ids = np.random.default_rng(0).integers(0, 11, 500)
    losses, windows = loss_by_position(model, ids, 8, windows=1000)
    assert losses.shape == (8,) and windows == 500 // 9  # as many as fit without overlapping
    # Position 0 of every window is the model's prediction from one token: the mean of those, recomputed.
    starts = np.linspace(0, len(ids) - 9, windows).astype(int)
    with torch.no_grad():
        first = torch.stack([torch.log_softmax(model(torch.tensor(ids[s:s + 1])[None])[0, 0], -1)[ids[s + 1]]
                             for s in starts])
    assert float(losses[0]) == pytest.approx(-float(first.mean()), rel=1e-4)
    record = extrapolation(model, ids, [8, 16])
    assert list(record["lengths"]) == ["8"]
    assert record["refused"] == "pos=learned has learned positions for 8 tokens only"
    assert record["lengths"]["8"]["loss"] == pytest.approx(float(losses.mean()), rel=1e-5)


def test_the_shortest_text_a_length_is_scored_on_gives_a_finite_loss_and_one_shorter_is_refused() -> None:
    """10 tokens hold one window of length 9 and refuse length 10 (scored on no window, its loss was 0 / 0); 20
    tokens hold two windows of 9 tokens' inputs and targets, where one token was held back and only one was scored."""
    model = GPT(replace(CFG, pos="rope"))
    ids = np.arange(20) % 11
    losses, windows = loss_by_position(model, ids[:10], 9)
    assert windows == 1 and bool(torch.isfinite(losses).all())
    with pytest.raises(ValueError, match="^length 10: the validation text has only 10 tokens"):
        loss_by_position(model, ids[:10], 10)
    assert loss_by_position(model, ids, 9)[1] == 2


def test_a_configuration_refused_at_every_length_is_a_row_of_the_report_not_its_end() -> None:
    """pos=learned in a sweep whose callbacks.lengths.at all lie past its table records no length: drawing it was an
    IndexError, and the sweep ended without its report."""
    ids = np.random.default_rng(0).integers(0, 11, 500)
    records = {pos: extrapolation(GPT(replace(CFG, pos=pos)), ids, [16]) for pos in ("learned", "rope")}
    assert records["learned"]["lengths"] == {} and list(records["rope"]["lengths"]) == ["16"]
    summaries = {f"pos={pos}": [{"status": "ok", "val_extrapolation": record}] for pos, record in records.items()}
    assert scaling.extrapolation_figure(summaries) is not None
    rows = scaling.extrapolation_markdown(summaries)
    assert "| `pos=learned` | — | pos=learned has learned positions for 8 tokens only |" in rows


def test_the_legend_covers_no_curve() -> None:
    # Inside the per-position panel it hid sinusoidal positions' climb past the trained length in the docs' figure.
    record = {"trained": 64, "lengths": {str(n): {"loss": 1.5, "bin": 8, "by_position": [1.5] * (n // 8)}
                                         for n in (64, 128, 256, 512)}}
    summaries = {f"pos={pos}": [{"status": "ok", "val_extrapolation": record}] * 2
                 for pos in ("learned", "sinusoidal", "rope", "alibi", "none")}
    figure = scaling.extrapolation_figure(summaries)
    figure.draw_without_rendering()
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend())]
    assert len(legends) == 1 and [t.get_text() for t in legends[0].get_texts()] == [*summaries, "trained length 64"]
    assert not any(legends[0].get_window_extent().overlaps(ax.get_window_extent()) for ax in figure.axes)


@pytest.mark.parametrize("length", ["0", "-3"])
def test_evaluate_refuses_a_length_of_no_tokens_before_any_work(length: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    # It scored the whole validation split first, then said "evaluate at shorter lengths" (-3) or named a tensor
    # shape (0).
    assert cli(["evaluate", "--ckpt", str(tmp_path), "--lengths", "64", length]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--lengths {length}: an evaluation length is a number of tokens" in err


SWEEP = ["trainer=debug", "trainer.max_steps=6", "trainer.val_check_interval=3", "logger=none", "model.layers=1",
         "model.heads=2", "model.dim=16", "model.block_size=16",
         "data=text", "data.batch_size=8", "data.val_windows=8", "data.doc_bytes=256", "data.num_proc=1",
         "callbacks.lengths.at=[16,32,64]", "callbacks.lengths.windows=8", "pos=learned,rope", "seed=0,1"]


def test_a_length_past_the_validation_text_is_refused_before_training(tmp_path: Path) -> None:
    """Scored only when training ended, it stopped the run there with no model.pt and no summary.json. pos=rope:
    learned positions record a length past their table as refused, whatever the text."""
    (tmp_path / "play.txt").write_text(play(600))
    run = tmp_path / "run"
    settings = [arg for arg in SWEEP if not arg.startswith(("callbacks.lengths.at", "pos", "seed"))]
    result = run_cli("train.py", f"hydra.run.dir={run}", f"data.path={tmp_path / 'play.txt'}", *settings,
                     "pos=rope", "callbacks.lengths.at=[16,100000]", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "callbacks.lengths.at has 100000, but the validation text has only" in result.stderr
    assert not (run / "history.csv").exists()


@pytest.fixture(scope="module")
def length_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("length_sweep")
    (folder / "play.txt").write_text(play(600))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OMP_NUM_THREADS", "1")
        # One job at a time, in the sweep's own process (one start-up of torch, not one per worker): which jobs
        # run side by side is not what this checks.
        result = run_cli("train.py", "-m", f"hydra.sweep.dir={folder / 'sweep'}", "hydra.launcher.n_jobs=1",
                         f"data.path={folder / 'play.txt'}", *SWEEP, cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    return folder / "sweep"


def test_a_sweep_records_loss_per_length_and_the_report_tables_and_plots_it(length_sweep: Path) -> None:
    summaries = {d.name: json.loads((d / "summary.json").read_text()) for d in length_sweep.iterdir()
                 if (d / "summary.json").is_file()}
    assert len(summaries) == 4
    report = (length_sweep / "report.md").read_text()
    table = report[report.index("## Loss past the trained length"):].split("\n\n")[1].splitlines()
    assert table[0] == "| configuration | 16 tokens | 32 tokens | 64 tokens | refused |"
    rows = {line.split("|")[1].strip(" `"): line for line in table[2:]}
    assert rows["pos=learned"].count("—") == 2 and "learned positions for 16 tokens only" in rows["pos=learned"]
    rope = [s["val_extrapolation"]["lengths"]["64"]["loss"] for s in summaries.values()
            if "64" in s["val_extrapolation"]["lengths"]]
    assert len(rope) == 2 and f"{np.mean(rope):.3f} ± {np.std(rope, ddof=1):.3f}" in rows["pos=rope"]
    image = imread(length_sweep / "extrapolation.png")
    assert image.shape[1] > 600 and image[..., :3].std() > 0


def test_evaluate_prints_loss_per_length_and_refuses_past_learned_positions(
        length_sweep: Path, capsys: pytest.CaptureFixture) -> None:
    runs = {json.loads((d / "summary.json").read_text())["val_extrapolation"].get("refused") is None: d
            for d in length_sweep.iterdir() if (d / "summary.json").is_file()}
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(runs[True] / "model.pt"), "--lengths", "16", "64"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"64 tokens \(\d+ windows\): loss [\d.]+; by position 0-15: [\d.]+, 16-31: [\d.]+, 32-63", out)
    # Every length is checked first: a length it cannot score was refused after the val split's loss and the
    # header of the lengths were printed.
    assert cli(["evaluate", "--ckpt", str(runs[False] / "model.pt"), "--lengths", "16", "64"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "pos=learned has learned positions for 16 tokens only" in err and out == ""
    assert cli(["evaluate", "--ckpt", str(runs[True] / "model.pt"), "--lengths", "16", "1000000"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "length 1000000: the validation text has only" in err and out == ""
