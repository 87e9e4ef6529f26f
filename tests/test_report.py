"""A real multirun (two configurations x two seeds, plus a configuration that cannot build) writes report.md
and loss.png itself; the rows match what the run folders' own Lightning metrics say."""
from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch
from joblib import cpu_count
from matplotlib.colors import to_rgb, to_rgba
from matplotlib.image import imread
from matplotlib.figure import Figure
from omegaconf import OmegaConf

from gpt.__main__ import main as cli
from gpt.inference.checkpoint import load_checkpoint
from gpt.model.attention import ATTENTION
from gpt.model.config import ModelConfig
from gpt.sweeps import capability, pareto
from gpt.sweeps.plots import LEGEND_INCHES, LOSS_FIGSIZE, loss_figure, styles
from gpt.sweeps.report import four_figures, markdown, write_report
from gpt.sweeps.report_figures import curves, figures
from gpt.sweeps.runs import find_runs, summaries
from tests.conftest import JOBS_AT_ONCE, ROOT
from tests.test_configs import compose_with


@pytest.fixture(scope="module")
def sweep(refusing_sweep: Path) -> Path:
    """The session's real multirun (tests/conftest.py's REFUSING_SWEEP), which this file's tests read."""
    return refusing_sweep


def test_jobs_ran_with_the_threads_the_launcher_gave_them(sweep: Path) -> None:
    summaries = [json.loads(p.read_text()) for p in sweep.glob("*/summary.json")]
    threads = [s["threads"] for s in summaries if s["status"] == "ok"]
    assert len(summaries) == 8 and threads == [max(1, cpu_count() // JOBS_AT_ONCE)] * 4


def table(report: str) -> dict[str, list[str]]:
    """report.md's first table as {configuration label: cells}, the header row under the key "configuration"."""
    first = report[report.index("\n| "):].split("\n\n")[0]  # the first table; the capability matrix follows
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))] for line in first.splitlines()
            if line.startswith("| ")]
    return {cells[0].strip("`"): cells for cells in rows}


def lightning_metric(run_dir: Path, name: str) -> float:
    """The last logged value of a metric in Lightning's own metrics.csv (independent of summary.json)."""
    with open(run_dir / "csv" / "version_0" / "metrics.csv", newline="") as f:
        return float([row[name] for row in csv.DictReader(f) if row[name]][-1])


def overrides(run_dir: Path) -> set[str]:
    return set((run_dir / ".hydra" / "overrides.yaml").read_text().replace("- ", "").split())


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_rows_pool_seeds_and_match_the_run_folders(sweep: Path, pos: str) -> None:
    rows = table((sweep / "report.md").read_text())
    header, row = rows["configuration"], rows[f"model.heads=2 pos={pos}"]
    runs = [d for d in sweep.iterdir() if d.is_dir() and {f"pos={pos}", "model.heads=2"} <= overrides(d)]
    assert len(runs) == 2 and row[header.index("seeds")] == "2" and row[header.index("status")] == "ok"
    for column, metric, show in (("val loss", "val/loss", "{:.4f}".format), ("ppl", "val/ppl", four_figures)):
        values = [lightning_metric(d, metric) for d in runs]
        mean = show(statistics.fmean(values))
        decimals = len(mean.partition(".")[2])  # the spread to the mean's last decimal
        assert row[header.index(column)].strip("*") == f"{mean} ± {statistics.stdev(values):.{decimals}f}"
    accuracy = [100 * lightning_metric(d, "val/acc_all") for d in runs]
    assert row[header.index("exact match %")].strip("*").startswith(f"{statistics.fmean(accuracy):.1f} ± ")
    model, _ = load_checkpoint(runs[0] / "model.pt")
    assert row[header.index("params")].strip("*") == f"{model.num_params():,}"
    kv_bytes = 2 * model.cfg.layers * model.cfg.dim * 4  # keys and values of every layer, float32
    assert row[header.index("KV bytes/token")].strip("*") == f"{kv_bytes:,}"


def test_failed_configuration_is_a_row_with_its_reason(sweep: Path) -> None:
    rows = table((sweep / "report.md").read_text())
    header = rows["configuration"]
    for pos in ("rope", "learned"):
        row = rows[f"model.heads=3 pos={pos}"]
        assert row[header.index("seeds")] == "0"
        assert row[header.index("status")] == ("refused: heads=3 does not divide dim=32: pick model.heads from "
                                                "[1, 2, 4, 8, 16, 32]")
        assert row[header.index("val loss")] == "—"
    assert len(rows) == 5  # header + four configurations


def test_loss_plot_decodes_at_its_size(sweep: Path) -> None:
    image = imread(sweep / "loss.png")
    assert image.shape[:2] == (round(LOSS_FIGSIZE[1] * 100), round(LOSS_FIGSIZE[0] * 100))
    assert image[..., :3].std() > 0  # something was drawn


def test_runs_shorter_than_one_validation_interval_still_report_numbers_and_curves(sweep: Path) -> None:
    rows = table((sweep / "report.md").read_text())
    header = rows["configuration"]
    for pos in ("rope", "learned"):
        row = rows[f"model.heads=2 pos={pos}"]
        for column in ("val loss", "exact match %"):
            float(row[header.index(column)].strip("*").split(" ± ")[0])  # a number, not "—"
    assert sorted(c["step"] for c in curves(find_runs(sweep)).values()) == [[30.0], [30.0]]
    image = imread(sweep / "loss.png")[..., :3]
    order = list(summaries(find_runs(sweep)))  # a configuration's colour is C<its place>; heads=3 is drawn nowhere
    first_drawn = next(label for label in order if not label.startswith("model.heads=3"))
    first_curve = np.abs(image - np.array(to_rgb(f"C{order.index(first_drawn)}"))).sum(axis=-1) < 0.05
    assert first_curve.sum() > 10  # the first drawn configuration's point is drawn, not just the axes


def test_a_configuration_has_one_colour_in_every_figure(sweep: Path) -> None:
    """Styles follow a configuration's place among all of the report's: numbered by the drawn lines alone, one
    after a failed configuration took another's colour in loss.png (which skips the failed) than in pareto.png."""
    runs = find_runs(sweep)
    order = list(summaries(runs))
    failed = [label for label in order if label.startswith("model.heads=3")]  # cannot build: drawn nowhere
    drawn = [label for label in order if label not in failed]
    assert failed and max(map(order.index, drawn)) > min(map(order.index, failed))  # one is drawn after a failed one
    found = figures(runs)
    loss, pareto_legend = found["loss.png"].legends[0], found["pareto.png"].legends[0]
    for legend, handles in ((loss, loss.get_lines()), (pareto_legend, pareto_legend.legend_handles)):
        colours = {text.get_text(): to_rgb(handle.get_color()) for text, handle in zip(legend.get_texts(), handles)}
        assert [colours[label] for label in drawn] == [to_rgb(f"C{order.index(label)}") for label in drawn]


def test_loss_plot_names_the_configurations_it_has_no_curve_for(tmp_path: Path) -> None:
    """A sweep whose high learning rates failed drew only the others' curves, their legend read as the whole sweep
    (matrix.png marks those rows failed)."""
    for i, (lr, status) in enumerate([("0.003", "ok"), ("0.003", "ok"), ("1000", "failed"), ("10", "refused")]):
        folder = tmp_path / str(i)
        fake_run(folder, [f"optim.lr={lr}", f"seed={i}"],
                 {"status": status, "val_loss": 2.0, "val_acc": {"copy": 0.5}} if status == "ok" else
                 {"status": status, "reason": "loss is nan at step 22"})
        if status == "ok":
            (folder / "history.csv").write_text("step,wall_s,val_loss\n20,1.0,3.0\n40,2.0,2.0\n")
    figure = figures(find_runs(tmp_path))["loss.png"]
    assert [t.get_text() for t in figure.legends[0].get_texts()] == [
        "optim.lr=0.003", "optim.lr=1000: failed, no curve", "optim.lr=10: refused, no curve"]
    assert [to_rgba(line.get_color())[3] for line in figure.legends[0].get_lines()] == [1, 0, 0]  # no line drawn


def test_loss_plot_of_a_sweep_stopped_before_any_run_finished_names_each_configuration(tmp_path: Path) -> None:
    """A sweep stopped by Ctrl-C with its first jobs part trained: loss.png had no legend at all and a title saying
    no run recorded a validation loss, beside history.csv files that held several."""
    for seed in (0, 1):
        fake_run(tmp_path / str(seed), ["attention=mha", f"seed={seed}"],
                 {"status": "stopped", "reason": "stopped by Ctrl-C at step 67"})
        (tmp_path / str(seed) / "history.csv").write_text("step,wall_s,val_loss\n50,1.0,2.0\n")
    figure = figures(find_runs(tmp_path))["loss.png"]
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["attention=mha: stopped, no curve"]
    assert figure._suptitle.get_text() == "no run finished with a validation loss: see report.md for why"


def test_a_long_configuration_label_leaves_the_panels_their_width() -> None:
    """A sweep of one configuration is labelled by all of its overrides: its legend, one line of 134 characters, took
    two thirds of loss.png and left each panel 2 inches wide."""
    label = ("callbacks.checkpoint.every_n_steps=5 model.dim=64 optim.warmup_steps=5 trainer.max_steps=10 "
             "trainer.val_check_interval=5 trainer=debug")
    curve = {"step": [5.0, 10.0], "wall_s": [1.0, 2.0], "mean": [3.0, 2.0], "std": [0.0, 0.0]}
    figure = loss_figure({label: curve}, styles([label]))
    figure.draw_without_rendering()
    assert all(ax.get_window_extent().width >= 4 * figure.dpi for ax in figure.axes)
    assert figure.legends[0].get_texts()[0].get_text().replace("\n", " ") == label


def test_loss_plot_ticks_steps_as_whole_numbers() -> None:
    """Validations at steps 20 and 40 were ticked 22.5, 27.5, 32.5: steps no optimizer takes."""
    curve = {"step": [20.0, 40.0], "wall_s": [1.0, 2.0], "mean": [3.0, 2.0], "std": [0.0, 0.0]}
    ax = loss_figure({"a": curve}, styles(["a"])).axes[0]
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert ticks and all(t == int(t) for t in ticks)


def test_every_configuration_of_a_preset_has_its_own_curve_style() -> None:
    # The attention presets sweep 11 variants: with matplotlib's 10 colours alone the 11th drew as the 1st.
    flat = {"step": [1.0, 2.0], "wall_s": [1.0, 2.0], "mean": [2.0, 1.0], "std": [0.0, 0.0]}
    labels = [f"attention={name}" for name in ATTENTION]
    figure = loss_figure(dict.fromkeys(labels, flat), styles(labels))
    legend = figure.legends[0].get_lines()
    looks = {(to_rgb(line.get_color()), line.get_linestyle()) for line in legend}
    assert len(ATTENTION) > 10 and len(looks) == len(legend) == len(ATTENTION)


def test_loss_plot_legend_covers_no_curve() -> None:
    # Inside the step panel the attention presets' 11 names covered weightless's curve, the highest, for its last
    # 400 steps in the ablation's loss.png.
    steps = [200.0, 400.0, 600.0, 800.0, 1000.0, 1200.0]
    labels = [f"attention={name}" for name in ATTENTION]
    curves = {label: {"step": steps, "wall_s": steps, "mean": [1.85 - 0.02 * i - 0.05 * (label != labels[0]) * i
                                                               for i in range(len(steps))], "std": [0.0] * 6}
              for label in labels}
    figure = loss_figure(curves, styles(labels))
    figure.draw_without_rendering()
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend())]
    assert len(legends) == 1
    assert not any(legends[0].get_window_extent().overlaps(ax.get_window_extent()) for ax in figure.axes)


def test_a_report_where_every_run_failed_is_a_table_of_reasons(tmp_path: Path) -> None:
    for lr in ("1e8", "1e9"):
        fake_run(tmp_path / lr, [f"optim.lr={lr}"], {"status": "failed", "reason": "loss is nan at step 2"})
    header, separator, *rows = next(t for t in markdown(tmp_path, find_runs(tmp_path)).split("\n\n")
                                    if t.startswith("| configuration")).splitlines()
    assert header == "| configuration | seeds | status |" and separator.count("|") == header.count("|")
    assert rows == [f"| `optim.lr={lr}` | 0 | failed: loss is nan at step 2 |" for lr in ("1e8", "1e9")]


def test_a_reason_naming_a_file_that_is_not_utf8_is_written_over_the_earlier_report(tmp_path: Path) -> None:
    """Python reads a file name's bytes that are not UTF-8 as lone surrogates, which write_text could not encode: it
    raised after emptying report.md, whose presence says the sweep ended."""
    fake_run(tmp_path / "0", ["data.path=a"], {"status": "failed", "reason": "no text in /data/caf\udce9.txt"})
    (tmp_path / "report.md").write_text("an earlier report")
    report = write_report(tmp_path).read_text(encoding="utf-8")
    assert "| `data.path=a` | 0 | failed: no text in /data/caf\\udce9.txt |" in report


def test_a_report_with_nothing_validated_says_why(tmp_path: Path) -> None:
    for seed in (0, 1):
        fake_run(tmp_path / str(seed), [f"seed={seed}"], {"status": "ok", "params": 100, "wall_s": 1.0})
    runs = find_runs(tmp_path)
    assert "Left out, with no value in any run: val loss, ppl, bpb, exact match %" in markdown(tmp_path, runs)
    assert "no run validated" in markdown(tmp_path, runs)
    assert "no run finished with a validation loss" in loss_figure(curves(runs), {})._suptitle.get_text()


def test_a_report_with_validation_off_names_the_setting_its_runs_recorded(tmp_path: Path) -> None:
    """summary.json names the setting that turned validation off: the note still guessed it with a question mark,
    and a run resumed with validation off (its earlier validations' rows in history.csv) was said to lack only
    exact-match answers."""
    off = {"status": "ok", "params": 100, "wall_s": 1.0, "tokens_per_s": 9.0, "peak_memory_bytes": 2**20,
           "kv_bytes_per_token": 64.0, "validation_off": "trainer.limit_val_batches=0.0"}
    fake_run(tmp_path / "0", ["seed=0"], off)
    fake_run(tmp_path / "1", ["seed=1"], off)
    (tmp_path / "1" / "history.csv").write_text("step,wall_s,val_loss\n50,1.0,3.5\n")
    assert ("Left out, with no value in any run: val loss, ppl, bpb, exact match %: validation was off "
            "(trainer.limit_val_batches=0.0), so there is no val loss.\n") in markdown(tmp_path, find_runs(tmp_path))
    (tmp_path / "1" / "history.csv").unlink()
    assert "validation was off (trainer.limit_val_batches=0.0), so there is no val loss and loss.png is empty." in \
        markdown(tmp_path, find_runs(tmp_path))


def test_report_command_rewrites_the_same_report(sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    written = (sweep / "report.md").read_text()
    copy = shutil.copytree(sweep, tmp_path / "sweep")  # the session's sweep is read by other tests meanwhile
    (copy / "report.md").unlink()
    assert cli(["report", str(copy)]) == 0
    assert (copy / "report.md").read_text() == written.replace(str(sweep), str(copy))  # it names its folder
    assert cli(["report", str(copy / "absent")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {copy / 'absent'} does not exist")
    (copy / "empty").mkdir()
    assert cli(["report", str(copy / "empty")]) == 2
    assert capsys.readouterr().err.startswith("error: no run folders")


def test_report_refuses_one_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A run's own folder, given for its sweep's, got a one-row "sweep report" and its figures written into it."""
    for seed in (0, 1):
        fake_run(tmp_path / str(seed), ["attention=a", f"seed={seed}"], {"status": "ok", "params": 100})
    assert cli(["report", str(tmp_path / "0")]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / '0'} is the folder of one run, not of a sweep: pass the "
                                       f"folder above it, python -m gpt report {tmp_path}\n")
    assert sorted(p.name for p in (tmp_path / "0").iterdir()) == [".hydra", "summary.json"]


@pytest.mark.parametrize("damage", [b"", b"- attention=a\n- se", b"- seed=0: [\n", b"\xff\xfe", b"[1, 2]\n"])
def test_a_damaged_overrides_record_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          damage: bytes) -> None:
    """An emptied or cut-short .hydra/overrides.yaml put its run in a row of its own, `(defaults)` or `se`, beside
    the configuration it ran; one that did not parse was a YAML or TypeError traceback."""
    for seed in (0, 1):
        fake_run(tmp_path / str(seed), ["attention=a", f"seed={seed}"], {"status": "ok", "params": 100})
    (tmp_path / "1" / ".hydra" / "overrides.yaml").write_bytes(damage)
    assert cli(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / '1' / '.hydra' / 'overrides.yaml'} is damaged (") and \
        err.endswith(f"): write it again from hydra.overrides.task in the hydra.yaml beside it, or delete "
                     f"{tmp_path / '1'}\n") and err.count("\n") == 1
    (tmp_path / "1" / ".hydra" / "overrides.yaml").write_text("[]\n")  # as Hydra writes no overrides: read
    assert [run.overrides for run in find_runs(tmp_path)] == [["attention=a", "seed=0"], []]


def fake_run(folder: Path, overrides: list[str], summary: dict) -> None:
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (folder / "summary.json").write_text(json.dumps(summary))


def test_cells_that_read_alike_are_bold_alike(tmp_path: Path) -> None:
    """Peak memory of 542.3 and 541.8 MiB both read 542: one was bold and its equal beside it was not."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "val_ppl": 3.0, "wall_s": 5.0, "tokens_per_s": 50.0}
    for index, (name, mib) in enumerate([("a", 542.3), ("b", 541.8), ("c", 600.0)]):
        fake_run(tmp_path / str(index), [f"attention={name}", "seed=0"], {**base, "peak_memory_bytes": mib * 2**20})
    rows = table(markdown(tmp_path, find_runs(tmp_path)))
    column = rows["configuration"].index("peak MiB")
    assert [rows[f"attention={name}"][column] for name in "abc"] == ["**542**", "**542**", "600"]


def test_the_settings_common_to_every_configuration_are_named_only_when_there_are_some(tmp_path: Path) -> None:
    """With none, the report read "Common to all configurations: `(nothing)`"."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "val_ppl": 3.0, "wall_s": 5.0}
    for index, name in enumerate("ab"):
        fake_run(tmp_path / "alone" / str(index), [f"attention={name}"], base)
        fake_run(tmp_path / "shared" / str(index), [f"attention={name}", "model.dim=64"], base)
    assert "Common to all" not in markdown(tmp_path / "alone", find_runs(tmp_path / "alone"))
    shared = markdown(tmp_path / "shared", find_runs(tmp_path / "shared"))
    assert "Common to all configurations: `model.dim=64`." in shared


def test_a_spread_shows_no_more_decimals_than_its_mean(tmp_path: Path) -> None:
    """Perplexity is shown in 4 significant figures: a mean of 3.993 read 3.993 ± 0.02552 and one of 4.220
    read 4.220 ± 0.006961, more digits of the spread than of the value."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "wall_s": 5.0}
    for seed, ppl in enumerate([3.97, 4.0, 4.01]):
        fake_run(tmp_path / str(seed), ["attention=a", f"seed={seed}"], {**base, "val_ppl": ppl})
    rows = table(markdown(tmp_path, find_runs(tmp_path)))
    assert rows["attention=a"][rows["configuration"].index("ppl")] == "3.993 ± 0.021"


@pytest.mark.parametrize("ppls, cell", [([1341.2], "1341"), ([1736.0, 1737.0], "1736 ± 1"), ([13.41], "13.41"),
                                        ([13.4], "13.40"), ([2.895e15], "2.895e+15"), ([999.96], "1000")])
def test_perplexity_is_four_figures_without_a_dangling_point(tmp_path: Path, ppls: list[float], cell: str) -> None:
    """A perplexity of four whole digits read 1341. and 1736. ± 1: "#" keeps a point where no decimal follows."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "wall_s": 5.0}
    for seed, ppl in enumerate(ppls):
        fake_run(tmp_path / str(seed), ["attention=a", f"seed={seed}"], {**base, "val_ppl": ppl})
    rows = table(markdown(tmp_path, find_runs(tmp_path)))
    assert rows["attention=a"][rows["configuration"].index("ppl")].strip("*") == cell


def test_a_mean_of_fewer_seeds_than_its_row_counts_says_how_many(tmp_path: Path) -> None:
    """A run finished from its checkpoint without training records no tokens/s: its row read "seeds 2" beside a
    tokens/s of one seed, unmarked."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "val_ppl": 3.0, "wall_s": 5.0}
    fake_run(tmp_path / "0", ["attention=a", "seed=0"], {**base, "tokens_per_s": 1000.0})
    fake_run(tmp_path / "1", ["attention=a", "seed=1"], {**base, "tokens_per_s": None})
    fake_run(tmp_path / "2", ["attention=b", "seed=0"], {**base, "tokens_per_s": 900.0})
    rows = table(markdown(tmp_path, find_runs(tmp_path)))
    column = rows["configuration"].index("train tok/s")
    assert rows["attention=a"][column].endswith(" (1 of 2)") and "(" not in rows["attention=a"][column - 1]
    assert "(" not in rows["attention=b"][column]


def test_best_value_of_each_column_is_bold_and_unfinished_jobs_say_so(tmp_path: Path) -> None:
    base = {"status": "ok", "params": 100, "val_ppl": 3.0, "wall_s": 5.0, "peak_memory_bytes": 2**20,
            "kv_bytes_per_token": 64.0}
    fake_run(tmp_path / "0", ["attention=a", "seed=0"], {**base, "val_loss": 1.0, "tokens_per_s": 50.0})
    fake_run(tmp_path / "1", ["attention=a", "seed=1"], {**base, "val_loss": 1.2, "tokens_per_s": 70.0})
    fake_run(tmp_path / "2", ["attention=b", "seed=0"], {**base, "val_loss": 0.9, "tokens_per_s": 40.0,
                                                         "val_ppl": 2.895e15})  # an untrained run's
    fake_run(tmp_path / "3", ["attention=b", "seed=1"], {"status": "failed", "reason": "val loss became nan at step 3"})
    (tmp_path / "4" / ".hydra").mkdir(parents=True)
    (tmp_path / "4" / ".hydra" / "overrides.yaml").write_text("- attention=c\n- seed=0\n")
    rows = table(markdown(tmp_path, find_runs(tmp_path)))
    header, a, b, c = rows["configuration"], rows["attention=a"], rows["attention=b"], rows["attention=c"]
    assert a[header.index("val loss")] == "1.1000 ± 0.1414" and b[header.index("val loss")] == "**0.9000**"
    assert a[header.index("train tok/s")] == "**60**" and b[header.index("train tok/s")] == "40"
    assert a[header.index("params")] == b[header.index("params")] == "100"  # all equal: nothing to mark
    assert a[header.index("ppl")] == "**3.000 ± 0.000**" and b[header.index("ppl")] == "2.895e+15"
    assert b[header.index("status")] == "1 of 2 failed: val loss became nan at step 3"
    assert c[header.index("status")] == "unfinished: no summary.json: the job stopped early or is still running"
    # a sweep read while it runs: its running job is not counted failed
    assert "failed runs: 1; 1 unfinished: stopped early or still running." in markdown(tmp_path, find_runs(tmp_path))
    assert "exact match %" not in header  # no run graded calculator problems


def test_a_stopped_job_is_a_stopped_row_counted_under_its_own_word(tmp_path: Path) -> None:
    """A job stopped by Ctrl-C read as failed, in its row and in the summary line's failed count."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "val_ppl": 3.0, "wall_s": 5.0}
    fake_run(tmp_path / "0", ["attention=a", "seed=0"], base)
    fake_run(tmp_path / "1", ["attention=b", "seed=0"], {"status": "stopped", "reason": "stopped by Ctrl-C at step 7"})
    fake_run(tmp_path / "2", ["attention=c", "seed=0"], {"status": "failed", "reason": "val loss became nan at step 3"})
    report = markdown(tmp_path, find_runs(tmp_path))
    rows = table(report)
    assert rows["attention=b"][rows["configuration"].index("status")] == "stopped: stopped by Ctrl-C at step 7"
    assert "failed runs: 1; 1 stopped (Ctrl-C or their sweep's stop; resume=true continues them)." in report


def test_a_sweep_stopped_before_some_jobs_started_names_them(tmp_path: Path) -> None:
    """A sweep stopped with Ctrl-C before its last jobs started leaves folders only for the jobs that started: its
    report read `Runs: 2, configurations: 1`, a complete sweep, with nothing of the two jobs it never ran. A folder of
    runs that no sweep recorded (no multirun.yaml) says nothing of jobs it cannot know."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "val_ppl": 3.0, "wall_s": 5.0}
    fake_run(tmp_path / "0", ["attention=mha", "seed=0", "trainer=debug"], base)
    fake_run(tmp_path / "1", ["attention=mha", "seed=1", "trainer=debug"],
             {"status": "stopped", "reason": "stopped by Ctrl-C at step 7"})
    assert "started" not in write_report(tmp_path).read_text()
    for damaged in ("hydra: [\n", "", "hydra:\n  overrides:\n    task: ['seed=0,1]']\n"):  # cut short, emptied, edited
        (tmp_path / "multirun.yaml").write_text(damaged)
        assert "started" not in write_report(tmp_path).read_text()
    OmegaConf.save({"hydra": {"sweeper": {"params": None},
                              "overrides": {"task": ["attention=mha,gqa", "seed=0,1", "trainer=debug"]}}},
                   tmp_path / "multirun.yaml")
    assert ("Never started: 2 of the sweep's 4 jobs (`attention=gqa seed=0`, `attention=gqa seed=1`): the sweep "
            "stopped before them; the same command plus resume=true runs them.") in write_report(tmp_path).read_text()
    # --best-of leaves configurations out of the table, not out of the sweep: they started
    fake_run(tmp_path / "2", ["attention=gqa", "seed=0", "trainer=debug"], base)
    fake_run(tmp_path / "3", ["attention=gqa", "seed=1", "trainer=debug"], {**base, "val_loss": 2.0})
    assert "started" not in write_report(tmp_path, ["attention"]).read_text()

def test_a_finished_job_whose_model_cannot_be_rebuilt_is_a_damaged_row(tmp_path: Path) -> None:
    """A finished job whose model.pt and last.ckpt were both cut short was an ok row, its model unloadable. One whose
    last.ckpt is whole stays ok (resume=true writes its model.pt again), as does one whose model.pt was deleted."""
    base = {"status": "ok", "params": 100, "val_loss": 1.0, "val_ppl": 3.0, "wall_s": 5.0}
    for index, (name, checkpoint) in enumerate([("lost", b"PK"), ("rebuildable", None), ("deleted", b"PK")]):
        job = tmp_path / str(index)
        fake_run(job, [f"attention={name}", "seed=0"], base)
        (job / "checkpoints").mkdir()
        if checkpoint is None:
            torch.save({}, job / "checkpoints/last.ckpt")
        else:
            (job / "checkpoints/last.ckpt").write_bytes(checkpoint)
        if name != "deleted":
            (job / "model.pt").write_bytes(b"PK\x03\x04")
    report = markdown(tmp_path, find_runs(tmp_path))
    rows = table(report)
    column = rows["configuration"].index("status")
    assert rows["attention=lost"][column] == "damaged: model.pt is damaged and cannot be rebuilt, its " \
        "checkpoints/last.ckpt damaged or gone: resume=true trains the job again"
    assert rows["attention=rebuildable"][column] == rows["attention=deleted"][column] == "ok"
    assert "failed runs: 0; 1 finished with a damaged model.pt that cannot be rebuilt (resume=true trains them " \
        "again)." in report


def test_sweeps_merged_under_one_folder_count_each_seed_once(tmp_path: Path) -> None:
    """The same sweep run twice under one date folder: its seeds 0 and 1 were pooled as four seeds, the repeats
    (the same numbers on CPU) narrowing the spread until the seed-noise line called a within-noise gap beyond it."""
    losses = {"a": [1.0, 1.2], "b": [0.9, 0.92]}
    for sweep in ("10-00-00", "11-00-00"):
        for i, (name, seed) in enumerate((n, s) for n in losses for s in (0, 1)):
            fake_run(tmp_path / sweep / str(i), [f"attention={name}", f"seed={seed}"],
                     {"status": "ok", "val_loss": losses[name][seed]})
    fake_run(tmp_path / "12-00-00" / "0", ["attention=a", "seed=0"], {"status": "failed", "reason": "boom"})
    report = markdown(tmp_path, find_runs(tmp_path))
    rows = table(report)
    assert rows["attention=a"][1:3] == ["2", "1.1000 ± 0.1414"]  # a later failure of a seed does not replace it
    assert "Runs: 4 (5 more left out: 5 ran a seed of their configuration again" in report
    assert "beyond seed noise (difference > 2 standard errors): none; within it: `attention=a`." in report


def test_a_seed_failed_twice_is_reported_with_its_later_failure(tmp_path: Path) -> None:
    """The same seed failed in two sweeps under one folder: the later run stands for it (its reason is the one that
    holds now), as a later finished run would."""
    fake_run(tmp_path / "10-00-00" / "0", ["attention=a", "seed=0"], {"status": "failed", "reason": "boom before"})
    fake_run(tmp_path / "11-00-00" / "0", ["attention=a", "seed=0"], {"status": "failed", "reason": "boom again"})
    report = markdown(tmp_path, find_runs(tmp_path))
    assert "| `attention=a` | 0 | failed: boom again |" in report and "boom before" not in report


def test_runs_are_read_in_job_order_not_the_order_of_their_names(tmp_path: Path) -> None:
    """Job 10 after job 2: sorted as text, job 10 came second, and a seed run again in it was taken for the earlier
    run."""
    for job in range(11):
        fake_run(tmp_path / str(job), [f"optim.lr={job}"], {"status": "ok", "val_loss": 1.0})
    assert [run.path.name for run in find_runs(tmp_path)] == [str(job) for job in range(11)]


def test_ablation_preset_sweeps_every_attention_variant_over_three_seeds() -> None:
    cfg = compose_with("experiment=attention_ablation")  # composes into a valid run configuration
    spec = OmegaConf.load(ROOT / "configs" / "experiment" / "attention_ablation.yaml").hydra
    params, expected = spec.sweeper.params, spec.callbacks.expected_time
    missing = sorted(set(ATTENTION) - set(params.attention.split(",")))
    assert not missing, f"configs/experiment/attention_ablation.yaml sweeps every attention= choice: add " \
                        f"{','.join(missing)} in its hydra.sweeper.params.attention"
    assert params.seed.split(",") == ["0", "1", "2"] and cfg.model.attention == "mha"
    assert expected.seconds_per_job > 0 and expected.steps == cfg.trainer.max_steps  # the steps it was timed at


def test_seed_noise_line_separates_differences_beyond_two_standard_errors(tmp_path: Path) -> None:
    losses = {"a": [1.0, 1.2], "b": [0.9, 0.92], "c": [2.0, 2.1], "d": [0.5]}  # d: one seed, no std error
    for i, (name, values) in enumerate((n, v) for n, vs in losses.items() for v in vs):
        fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"], {"status": "ok", "val_loss": values})
    line = next(x for x in markdown(tmp_path, find_runs(tmp_path)).splitlines() if x.startswith("Final val loss"))
    # a - b = 0.19 against 2 * sqrt(0.02/2 + 0.0002/2) = 0.201; c - b = 1.14 against 0.103. d is the bold best of
    # the column, so the line must not call b the best without saying which best it means.
    assert line.endswith("best with two seeds or more (`attention=b`), beyond seed noise (difference > 2 standard "
                         "errors): `attention=c`; within it: `attention=a`.")


@pytest.mark.parametrize("first", ["c", "d"])
def test_seed_noise_line_compares_against_every_configuration_tied_for_best(tmp_path: Path, first: str) -> None:
    # c and d tie at 1.1: e is beyond noise of c (no spread) though within d's; whichever row came first decided.
    losses = {"c": [1.1, 1.1], "d": [0.9, 1.3], "e": [1.2, 1.2]}
    order = [first, *({"c", "d"} - {first}), "e"]
    for i, (name, values) in enumerate((n, v) for n in order for v in losses[n]):
        fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"], {"status": "ok", "val_loss": values})
    line = next(x for x in markdown(tmp_path, find_runs(tmp_path)).splitlines() if x.startswith("Final val loss"))
    tied = ", ".join(f"`attention={name}`" for name in order[:2])
    assert line == (f"Final val loss against the best ({tied}), beyond seed noise (difference > 2 standard errors): "
                    "`attention=e`; within it: none.")


def test_seed_noise_line_ties_the_means_its_table_prints_alike(tmp_path: Path) -> None:
    """Both rows read **1.0000 ± 0.0000**, bold alike, yet the line called one beyond seed noise of the other."""
    losses = {"a": [1.00001, 1.00001], "b": [1.00002, 1.00002], "c": [1.2, 1.3]}
    for i, (name, values) in enumerate((n, v) for n, vs in losses.items() for v in vs):
        fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"], {"status": "ok", "val_loss": values})
    report = markdown(tmp_path, find_runs(tmp_path))
    assert table(report)["attention=b"][2] == "**1.0000 ± 0.0000**"
    line = next(x for x in report.splitlines() if x.startswith("Final val loss"))
    assert line == ("Final val loss against the best (`attention=a`, `attention=b`), beyond seed noise (difference > 2 "
                    "standard errors): `attention=c`; within it: none.")


def test_cost_card_and_pareto_plot_price_each_configuration_by_its_formula(sweep: Path) -> None:
    """The card's cache bytes are the trained model's own formula; pareto.png plots each capability column's mean
    over seeds against cache MiB at PARETO_DEPTH (panels PANELS_PER_ROW to a row, each configuration named once in
    the legend), and joins only the trade-offs nothing beats."""
    report = (sweep / "report.md").read_text()
    card = table(report[report.index("## Cost card"):])
    runs = [r for r in find_runs(sweep) if r.ok and {"pos=rope", "model.heads=2"} <= set(r.overrides)]
    model, _ = load_checkpoint(runs[0].path / "model.pt")
    block = model.cfg.block_size
    row = card["model.heads=2 pos=rope"]
    assert row[1:] == [f"{model.num_params():,}", f"{model.cache_bytes(1, block) / block:,.0f}",
                       f"{model.cache_bytes(1, 4096) / 2**20:,.2f}", f"{model.cache_bytes(1, 16384) / 2**20:,.2f}"]
    by_config = summaries(find_runs(sweep))
    data = pareto.points(by_config)
    assert data and set(data) == set(capability.columns(by_config))
    for column, by_label in data.items():
        x, y, _ = by_label["model.heads=2 pos=rope"]
        assert x == model.cache_bytes(1, pareto.PARETO_DEPTH)
        assert y == pytest.approx(statistics.fmean(100 * r.summary["val_acc"][column] for r in runs))
    rows, columns = math.ceil(len(data) / pareto.PANELS_PER_ROW), min(len(data), pareto.PANELS_PER_ROW)
    image = imread(sweep / "pareto.png")  # saved at matplotlib's 100 dpi
    width, height = pareto.PANEL_INCHES[0] * columns + LEGEND_INCHES, pareto.PANEL_INCHES[1] * rows
    assert image.shape[:2] == (round(100 * height), round(100 * width)) and image[..., :3].std() > 0
    fig = pareto.figure(by_config)
    assert len(fig.axes) == len(data) and all("cache MiB" in ax.get_xlabel() for ax in fig.axes)
    first_x, _, _ = next(iter(data[next(iter(data))].values()))  # the first panel's first point, in bytes
    assert fig.axes[0].containers[0].lines[0].get_xdata()[0] == pytest.approx(first_x / 2**20)
    priced = [label for label in by_config if any(label in by_label for by_label in data.values())]
    assert set(priced) == {"model.heads=2 pos=rope", "model.heads=2 pos=learned"}  # heads=3 cannot build: no point
    assert [t.get_text() for t in fig.legends[0].get_texts()] == priced  # once each, in the report's order
    rings = sorted(line.get_markersize() for line in fig.axes[0].lines if line.get_markersize() > pareto.MARKER_SIZE)
    stacked = sorted(size for size in pareto.marker_sizes(next(iter(data.values()))).values()
                     if size > pareto.MARKER_SIZE)
    assert rings == stacked  # the first panel's points that others cover get their rings
    # A stack at one cache size within OVERLAP points shows as rings, the first drawn largest; 15% is apart from it.
    assert pareto.marker_sizes({"a": (1, 99.9, 0), "b": (1, 100, 0), "c": (1, 99.7, 0), "d": (1, 15, 0),
                                "e": (2, 99.9, 0)}) == {"a": 12.0, "b": 9.0, "c": 6.0, "d": 6.0, "e": 6.0}
    assert pareto.frontier({"a": (1, 50, 0), "b": (2, 40, 0), "c": (3, 60, 0), "d": (3, 55, 0)}) == [(1, 50), (3, 60)]


def test_cost_card_never_reads_a_cache_as_zero_mib(tmp_path: Path) -> None:
    model = ModelConfig(vocab_size=10, attention="linear", linear_features=2, pos="rope").to_dict()
    fake_run(tmp_path / "0", ["seed=0"], {"status": "ok", "val_loss": 1.0, "params": 100, "model": model})
    row = table(markdown(tmp_path, find_runs(tmp_path)).split("## Cost card")[1])["(defaults)"]
    state = pareto.cache_bytes(model, 4096)
    assert state == pareto.cache_bytes(model, 16384) < 0.005 * 2**20  # a fixed state, 0.00 MiB to two decimals
    assert row[-2:] == [f"{state / 2**20:.2g}"] * 2 and float(row[-1]) > 0


def test_cost_card_marks_depths_past_the_positions_a_model_places(tmp_path: Path) -> None:
    """pos=learned places block_size positions only: its card read 16.00 MiB at 16k tokens beside pos=rope's, a cache
    it can never hold, unmarked."""
    for index, pos in enumerate(["learned", "rope"]):
        model = ModelConfig(vocab_size=10, block_size=64, pos=pos).to_dict()
        fake_run(tmp_path / str(index), [f"pos={pos}"], {"status": "ok", "val_loss": 1.0, "params": 100,
                                                         "model": model})
    report = markdown(tmp_path, find_runs(tmp_path)).split("## Cost card")[1]
    card = table(report)
    assert [cell[-1] for cell in card["pos=learned"][-2:]] == ["*", "*"]
    assert all(cell[-1].isdigit() for cell in card["pos=rope"][-2:])
    assert "\\* past the positions the model places (pos=learned places 64)" in report


def test_a_report_written_again_leaves_no_figure_of_the_earlier_one(tmp_path: Path) -> None:
    """A report rewritten for runs without task accuracy left the earlier matrix.png beside it, unlinked and stale."""
    fake_run(tmp_path / "0", ["seed=0"], {"status": "ok", "val_loss": 1.0, "val_acc": {"copy": 0.5, "all": 0.5}})
    cli(["report", str(tmp_path)])
    assert (tmp_path / "matrix.png").is_file()
    (tmp_path / "0" / "summary.json").write_text(json.dumps({"status": "ok", "val_loss": 1.0}))
    cli(["report", str(tmp_path)])
    assert not (tmp_path / "matrix.png").exists() and (tmp_path / "loss.png").is_file()


def test_a_report_without_accuracy_links_no_pareto_plot(tmp_path: Path) -> None:
    """Runs of running text price their cache but grade no answers: report.md linked pareto.png, never drawn."""
    model = ModelConfig(vocab_size=10).to_dict()
    for seed in (0, 1):
        fake_run(tmp_path / str(seed), [f"seed={seed}"], {"status": "ok", "val_loss": 1.0, "params": 100,
                                                          "model": model})
    assert cli(["report", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "## Cost card" in report and "pareto.png" not in report and not (tmp_path / "pareto.png").exists()


def test_pareto_ticks_read_the_points_cache_sizes_as_numbers() -> None:
    """Within a decade matplotlib labelled the log axis 2×10¹ and 3×10¹ beside points at 16 and 32 MiB; and ticks
    too close to read apart are left out."""
    fig = Figure()
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_xlim(0.005, 50)  # four decades: a label takes about a tenth of them
    pareto.label_points(ax, [16.0, 32.0, 40.0, 0.0078125, 0.015625, 4.0, 16.0])
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.0078", "4", "16"]
    assert ax.xaxis.get_minorticklocs().size == 0


def test_pareto_error_bars_stay_within_0_and_100_percent() -> None:
    """Seeds at 0 and 10% drew a bar of 5 ± 7.1 down to -2.1% exact match, and seeds at 90 and 100% one up to 102.1%."""
    model = ModelConfig(vocab_size=10).to_dict()
    runs = {f"attention={name}": [{"status": "ok", "model": {**model, "attention": name}, "val_acc": {"copy": acc}}
                                  for acc in accuracies]
            for name, accuracies in (("mha", (0.0, 0.1)), ("mqa", (1.0, 0.9)))}
    ends = [y for c in pareto.figure(runs).axes[0].containers for segment in c.lines[2][0].get_segments()
            for _, y in segment]
    assert min(ends) == 0.0 and max(ends) == 100.0


def test_pareto_draws_no_error_bar_for_a_point_of_one_seed() -> None:
    """A seed alone drew a bar of 0, its caps through the point, under a title of "mean ± std over seeds": a spread
    no run measured, read as seeds that agree."""
    model = ModelConfig(vocab_size=10).to_dict()
    runs = {f"attention={name}": [{"status": "ok", "model": {**model, "attention": name}, "val_acc": {"copy": acc}}
                                  for acc in accuracies]
            for name, accuracies in (("mha", (0.4,)), ("mqa", (0.5, 0.7)))}
    ax = pareto.figure(runs).axes[0]
    bars = {c.get_label(): [[y for _, y in segment] for segment in c.lines[2][0].get_segments()]
            for c in ax.containers}
    assert bars["attention=mha"] == [[]] and bars["attention=mqa"] == [pytest.approx([60 - 10 * 2 ** 0.5,
                                                                                      60 + 10 * 2 ** 0.5])]
    assert ax.get_title() == "copy (mean ± std over seeds)"
    assert pareto.figure({"attention=mha": runs["attention=mha"]}).axes[0].get_title() == \
        "copy (one seed each, no spread)"
