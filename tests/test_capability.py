"""The sweep report's capability matrix: accuracy per task column, seeds pooled, best bold, gaps beyond seed
noise marked, and its heatmap, from fake run folders and from a real tiny multirun over the task mixture."""
from __future__ import annotations

import json
import re
import statistics
from typing import Any
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from gpt.data.tasks import TASKS
from gpt.sweeps import capability, scaling
from gpt.sweeps.plots import matrix_figure
from gpt.sweeps.report import markdown, write_report
from gpt.sweeps.report_figures import figures
from gpt.sweeps.runs import find_runs, summaries
from tests.conftest import run_cli
from tests.test_report import fake_run


def matrix_rows(report: str) -> dict[str, list[str]]:
    """The capability matrix's table as {configuration label: cells}, its header under "configuration"."""
    table = report[report.index("## Capability matrix"):].split("\n\n")[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]
    return {cells[0].strip("`"): cells for cells in rows}


def test_matrix_pools_seeds_bolds_the_best_and_marks_gaps_beyond_noise(tmp_path: Path) -> None:
    accuracy = {"a": [(1.0, 0.50), (1.0, 0.52)], "b": [(0.98, 0.9), (0.97, 0.3)], "c": [(0.2, 0.6)]}
    i = 0
    for name, seeds in accuracy.items():
        for recall, far in seeds:
            fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"],
                     {"status": "ok", "val_loss": 1.0, "val_acc": {"recall": recall, "distance_33_63": far, "all": 0}})
            i += 1
    # Should a failed run's summary hold scores, they are no configuration's result: only finished runs pool.
    fake_run(tmp_path / str(i), ["attention=d", "seed=0"], {"status": "failed", "reason": "boom",
                                                            "val_acc": {"recall": 0.99, "distance_33_63": 0.99}})
    rows = matrix_rows(markdown(tmp_path, find_runs(tmp_path)))
    header = rows["configuration"]
    assert header[1:] == ["recall", "distance_33_63"]  # "all" is the main table's; groups in the runs' order
    recall, far = header.index("recall"), header.index("distance_33_63")
    assert rows["attention=a"][recall] == "**100.0 ± 0.0**"
    assert rows["attention=b"][recall] == f"97.5 ± {statistics.stdev([98, 97]):.1f} {capability.BEYOND_NOISE}"
    assert rows["attention=c"][recall] == "20.0"  # one seed: no claim about noise either way
    # b's distance accuracy spreads over 60 points: 60 against a's 51 is within seed noise; c has the best mean.
    assert rows["attention=c"][far] == "**60.0**" and rows["attention=a"][far] == "51.0 ± 1.4"
    assert rows["attention=d"][recall] == "—"


def test_cells_that_read_alike_are_the_best_alike_and_behind_none(tmp_path: Path) -> None:
    """50.011% and 50.022% both read **50.0 ± 0.0**, bold as equals, yet the first was marked behind the best."""
    for i, (name, recall) in enumerate([("a", 0.50011), ("a", 0.50011), ("b", 0.50022), ("b", 0.50022),
                                        ("c", 0.3), ("c", 0.3)]):
        fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"recall": recall}})
    rows = matrix_rows(markdown(tmp_path, find_runs(tmp_path)))
    assert [rows[f"attention={name}"][1] for name in "abc"] == [
        "**50.0 ± 0.0**", "**50.0 ± 0.0**", f"30.0 ± 0.0 {capability.BEYOND_NOISE}"]


def test_values_still_rising_when_training_stopped_are_marked(tmp_path: Path) -> None:
    """Each seed's last validation against its own one before (history.csv), paired: a mark where every seed still
    climbs, none at the ceiling, for an inconsistent rise, for one seed, or for a run that validated once."""
    seeds = {"climbing": [(0.40, 0.60), (0.30, 0.55), (0.50, 0.66)], "ceiling": [(0.95, 0.995), (0.96, 0.996)],
             "mixed": [(0.5, 0.7), (0.7, 0.52), (0.6, 0.61)], "one_seed": [(0.1, 0.9)],
             "once": [(None, 0.3), (None, 0.5)]}
    i = 0
    for name, runs in seeds.items():
        for before, last in runs:
            folder = tmp_path / str(i)
            fake_run(folder, [f"attention={name}", f"seed={i}"],
                     {"status": "ok", "val_loss": 1.0, "val_acc": {"recall_8": last, "all": last}})
            validations = [(400, before), (800, last)] if before is not None else [(800, last)]
            (folder / "history.csv").write_text("step,wall_s,val_loss,val_acc_recall_8,val_acc_all\n" + "".join(
                f"{step},1.0,1.0,{acc},{acc}\n" for step, acc in validations))
            i += 1
    report = markdown(tmp_path, find_runs(tmp_path))
    rows = matrix_rows(report)
    marked = {name for name in seeds if rows[f"attention={name}"][1].endswith(capability.RISING)}
    assert marked == {"climbing"}
    assert f"{capability.RISING} marks a value still rising" in report
    by_label = summaries(find_runs(tmp_path))  # the heatmap writes the mark on the cell too
    rows, cols, means = capability.matrix(by_label)
    figure = matrix_figure(rows, cols, means, capability.marks(by_label, cols))
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert texts[0] == "60↑" and texts[1] == "99.5" and "still rising" in figure.axes[0].get_title()
    for folder in tmp_path.iterdir():  # the same last values after a single validation each: nothing to compare
        (folder / "history.csv").unlink()
    assert capability.RISING not in markdown(tmp_path, find_runs(tmp_path))


def test_a_calculator_column_named_with_a_space_is_marked_rising_too(tmp_path: Path) -> None:
    """history.csv logs "divided by" as val_acc_divided_by: the report looked for it under its own name, so the
    calculator's division column was never marked still rising, however fast it climbed."""
    for seed, (before, last) in enumerate([(0.2, 0.6), (0.3, 0.7)]):
        folder = tmp_path / str(seed)
        fake_run(folder, ["attention=mha", f"seed={seed}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"plus": last, "divided by": last, "all": last}})
        (folder / "history.csv").write_text("step,wall_s,val_loss,val_acc_plus,val_acc_divided_by,val_acc_all\n"
                                            + "".join(f"{step},1.0,1.0,{acc},{acc},{acc}\n"
                                                      for step, acc in [(400, before), (800, last)]))
    header, row = matrix_rows(markdown(tmp_path, find_runs(tmp_path))).values()
    assert row[header.index("plus")].endswith(capability.RISING)
    assert row[header.index("divided by")].endswith(capability.RISING)


@pytest.mark.parametrize("columns", [1, 2])
@pytest.mark.parametrize("row", ["pos=rope", "attention=sliding_window pos=alibi"])
def test_the_heatmap_of_few_columns_shows_its_whole_title(columns: int, row: str) -> None:
    """A sweep on data=recall has one column: the figure, sized by its columns, cut the title off at both ends; with
    long row labels (a sweep over attention and pos) at its right end still."""
    figure = matrix_figure([row, "pos=alibi"], [f"recall_{4 * i}\n(chance 35)" for i in range(columns)],
                           [[99.0] * columns, [50.0] * columns], [[""] * columns, [capability.RISING] * columns])
    figure.draw_without_rendering()
    title, width = figure.axes[0].title.get_window_extent(), figure.bbox.width
    assert 0 <= title.x0 and title.x1 <= width


def test_a_configuration_whose_runs_all_failed_says_so_across_its_heatmap_row(tmp_path: Path) -> None:
    """torch_mha under pos=rope is refused: its row of matrix.png was plain white, as if never swept."""
    scores = {"recall_8": 0.9, "distance_1_16": 0.5, "copy": 0.3}
    runs = {"mha": ["ok", "ok"], "torch_mha": ["refused", "refused"], "linear": ["failed", "unfinished"]}
    for i, (name, word) in enumerate((n, w) for n, words in runs.items() for w in words):
        fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"],
                 {"status": word, "val_loss": 1.0, "val_acc": scores} if word == "ok" else {"status": word})
    texts = figures(find_runs(tmp_path))["matrix.png"].axes[0].texts
    assert [(t.get_text(), t.get_position()) for t in texts] == [
        ("90", (0, 0)), ("50", (1, 0)), ("30", (2, 0)), ("refused", (1, 1)), ("failed", (1, 2))]


def test_the_heatmap_never_rounds_a_score_to_perfect_or_null() -> None:
    """99.6 was written on its cell as 100 and 0.3 as 0, beside cells that are exactly that."""
    means = [[99.6, 99.96, 100.0, 0.3, 0.0, 42.4, 99.4]]
    figure = matrix_figure(["a"], list("bcdefgh"), means, [[""] * 7])
    assert [t.get_text() for t in figure.axes[0].texts] == ["99.6", "99.9", "100", "0.3", "0", "42", "99"]


def test_the_heatmap_writes_a_score_below_10_as_its_table_does(tmp_path: Path) -> None:
    """Near chance, where the rows part, a table's 1.5 read 2 on its cell, and 0.6 read 1 beside a 0.4."""
    seeds = {"a": [(0.0297, 0.0039), (0.0, 0.0039)], "b": [(0.0099, 0.0039), (0.0119, 0.0078)]}
    for i, (name, recall, far) in enumerate((n, r, f) for n, runs in seeds.items() for r, f in runs):
        fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"recall_8": recall, "far": far}})
    runs = find_runs(tmp_path)
    table = [cell.split(" ± ")[0].strip("*") for name in "ab" for cell in matrix_rows(markdown(tmp_path, runs))[
        f"attention={name}"][1:]]
    cells = [t.get_text() for t in figures(runs)["matrix.png"].axes[0].texts]
    assert table == cells == ["1.5", "0.4", "1.1", "0.6"]


def test_the_matrix_table_never_rounds_a_score_to_perfect_or_null(tmp_path: Path) -> None:
    """Seeds at 100, 100 and 99.88% read "**100.0 ± 0.0**", a perfect score, where its heatmap cell read 99.9."""
    for i, (recall, far) in enumerate([(1.0, 0.0), (1.0, 0.0), (0.9988, 0.0012)]):
        fake_run(tmp_path / str(i), ["attention=a", f"seed={i}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"recall": recall, "far": far}})
    fake_run(tmp_path / "3", ["attention=b", "seed=0"],
             {"status": "ok", "val_loss": 1.0, "val_acc": {"recall": 1.0, "far": 0.0}})
    rows = matrix_rows(markdown(tmp_path, find_runs(tmp_path)))
    assert rows["attention=a"][1:] == ["99.9 ± 0.1", "**0.1 ± 0.1**"]
    assert rows["attention=b"][1:] == ["**100.0**", "0.0"]


def test_chance_row_and_per_token_matrix_where_answers_have_several_tokens(tmp_path: Path) -> None:
    """Exact match's chance row is a guess of every token of an answer: a copy of 2 tokens of 16 is guessed whole once
    in 256 (0.4%), not once in 16 (6.2%, its per-token chance, which the exact-match matrix and matrix.png showed)."""
    for i, (name, copy_token, copy_exact) in enumerate([("a", 0.9, 0.5), ("a", 0.8, 0.4), ("b", 0.3, 0.0)]):
        fake_run(tmp_path / str(i), [f"attention={name}", f"seed={i}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"recall_8": 0.9, "copy": copy_exact, "all": 0.5},
                  "val_token_acc": {"recall_8": 0.9, "copy": copy_token, "all": 0.6},
                  "val_chance": {"recall_8": 0.125, "copy": 0.0625, "all": 0.1},
                  "val_exact_chance": {"recall_8": 0.125, "copy": 0.0625 ** 2, "all": 0.1}})
    report = markdown(tmp_path, find_runs(tmp_path))
    rows = matrix_rows(report)
    assert rows["*chance*"][1:] == ["*12.5*", "*0.4*"]
    assert "*chance* is what guessing scores" in report and "*chance* here is per token" in report
    per_token = report[report.index("### Per-token accuracy"):].split("\n\n")[1].splitlines()
    assert per_token[0] == "| configuration | copy |"  # recall's one-token answers: exact match says it all
    assert per_token[2] == "| `attention=a` | **85.0 ± 7.1** |" and per_token[-1] == "| *chance* | *6.2* |"
    heatmap = figures(find_runs(tmp_path))["matrix.png"]
    assert [t.get_text() for t in heatmap.axes[0].get_xticklabels()] == ["recall_8\n(chance 12)", "copy\n(chance 0.4)"]


def test_a_sweep_of_a_setting_that_changes_chance_shows_its_range_not_their_mean(tmp_path: Path) -> None:
    """Recall's values and copy's vocab keep their columns' names but change what guessing scores: with 4 values a
    guess at 8 pairs scores 47.4%, with 32 values 35.3%, and the chance row read their mean, 41.4%, a chance no row
    has. A column whose runs agree (within float rounding: 0.1 + 0.2 is 0.3) still reads one number, and a whole
    copy of 16 tokens guessed from 8 or 16 reads 0.0 either way."""
    sweep = [("values=4 vocab=8", 0.474, 0.125, 0.1 + 0.2), ("values=4 vocab=8", 0.474, 0.125, 0.1 + 0.2),
             ("values=32 vocab=16", 0.353, 0.0625, 0.3)]
    for i, (setting, recall, copy, distance) in enumerate(sweep):
        values, vocab = (word.split("=")[1] for word in setting.split())
        fake_run(tmp_path / str(i), [f"data.tasks.recall.values={values}", f"data.tasks.copy.vocab={vocab}",
                                     f"seed={i}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"recall_8": 0.5, "copy": 0.0, "distance_1_8": 0.5},
                  "val_token_acc": {"recall_8": 0.5, "copy": 0.2, "distance_1_8": 0.5},
                  "val_tokens": {"recall_8": 1.0, "copy": 16.0, "distance_1_8": 1.0},
                  "val_chance": {"recall_8": recall, "copy": copy, "distance_1_8": distance},
                  "val_exact_chance": {"recall_8": recall, "copy": copy ** 16, "distance_1_8": distance}})
    by_label = summaries(find_runs(tmp_path))
    assert capability.chance(by_label, "recall_8") == pytest.approx((35.3, 47.4))
    assert capability.chance(by_label, "distance_1_8") == pytest.approx((30.0, 30.0))
    report = markdown(tmp_path, find_runs(tmp_path))
    assert matrix_rows(report)["*chance*"][1:] == ["*35.3–47.4*", "*0.0*", "*30.0*"]
    per_token = report[report.index("### Per-token accuracy"):].split("\n\n")[1].splitlines()
    assert per_token[-1] == "| *chance* | *6.2–12.5* |"
    assert report.count("the configurations' lines differ in what guessing scores") == 2
    heatmap = figures(find_runs(tmp_path))["matrix.png"]
    assert [t.get_text() for t in heatmap.axes[0].get_xticklabels()] == [
        "recall_8\n(chance 35–47)", "copy\n(chance 0.0)", "distance_1_8\n(chance 30)"]


def test_one_chance_per_column_says_nothing_of_ranges(tmp_path: Path) -> None:
    """The caption explains a range only where the table writes one."""
    for seed in range(2):
        fake_run(tmp_path / str(seed), ["attention=a", f"seed={seed}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"recall_8": 0.5}, "val_token_acc": {"recall_8": 0.5},
                  "val_chance": {"recall_8": 0.353}, "val_exact_chance": {"recall_8": 0.353}})
    report = markdown(tmp_path, find_runs(tmp_path))
    assert matrix_rows(report)["*chance*"][1:] == ["*35.3*"] and "differ in what guessing scores" not in report


def test_the_chance_caption_holds_for_any_task_so_names_none(tmp_path: Path) -> None:
    """The caption said how a guess is drawn for recall, distance and copying alone: a task registered later sets
    the chance of its turns in a way of its own, which the sentence read as one of theirs or left out."""
    for seed in range(2):
        fake_run(tmp_path / str(seed), ["data=length", f"seed={seed}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"length_1_8": 0.5}, "val_chance": {"length_1_8": 0.0625},
                  "val_exact_chance": {"length_1_8": 0.0625 ** 4}})
    report = markdown(tmp_path, find_runs(tmp_path))
    caption = next(p for p in report.split("\n\n") if "*chance* is what guessing scores" in p)
    chance = caption[caption.index("*chance* is"):]
    assert [name for name in TASKS if re.search(rf"\b{name}\b", chance)] == [], chance


def test_a_calculator_matrix_explains_no_chance_row_it_does_not_have(tmp_path: Path) -> None:
    """The calculator grades no guess: its captions still described a *chance* row of recall, distance and copying."""
    for seed, acc in enumerate([0.8, 0.6]):
        fake_run(tmp_path / str(seed), ["data=calculator", f"seed={seed}"],
                 {"status": "ok", "val_loss": 1.0, "val_acc": {"plus": acc, "all": acc},
                  "val_token_acc": {"plus": acc, "all": acc}, "val_tokens": {"plus": 3.0, "all": 3.0}})
    report = markdown(tmp_path, find_runs(tmp_path))
    matrices = report[report.index("## Capability matrix"):]
    assert "### Per-token accuracy" in matrices and "chance" not in matrices and "copy" not in matrices


def test_the_per_token_matrix_leaves_out_one_token_answers_even_where_the_line_end_was_missed(tmp_path: Path) -> None:
    """Exact match also needs the end of the line after the last answer, so an undertrained run's one-token column
    read lower on exact match than per token, and the per-token matrix listed it as having several tokens."""
    fake_run(tmp_path / "0", ["attention=a", "seed=0"],
             {"status": "ok", "val_loss": 1.0, "val_acc": {"distance_17_32": 0.002, "copy": 0.1},
              "val_token_acc": {"distance_17_32": 0.004, "copy": 0.3},
              "val_tokens": {"distance_17_32": 1.0, "copy": 5.5}})
    per_token = markdown(tmp_path, find_runs(tmp_path)).split("### Per-token accuracy")[1].split("\n\n")[1]
    assert per_token.splitlines()[0] == "| configuration | copy |"


def test_best_of_keeps_each_configurations_best_learning_rate(tmp_path: Path) -> None:
    runs = {("a", "1e-3"): [0.9, 0.8], ("a", "1e-2"): [0.5, 0.6], ("b", "1e-3"): [0.1, 0.2], ("b", "1e-2"): [0.7, 0.7]}
    i = 0
    for (name, lr), seeds in runs.items():
        for acc in seeds:
            fake_run(tmp_path / str(i), [f"attention={name}", f"optim.lr={lr}", f"seed={i}"],
                     {"status": "ok", "val_loss": 1.0, "val_acc": {"recall_8": acc, "all": acc}})
            i += 1
    report = (write_report(tmp_path, best_of=["optim.lr"])).read_text()
    rows = matrix_rows(report)
    assert set(rows) == {"configuration", "attention=a optim.lr=1e-3", "attention=b optim.lr=1e-2"}
    assert "- `attention=a`: best `optim.lr=1e-3` (exact match 85.0%, val loss 1.0000); also tried `optim.lr=1e-2` " \
        "exact match 55.0%, val loss 1.0000" in report
    assert len(matrix_rows(write_report(tmp_path).read_text())) == 5  # without best_of every setting stays
    with pytest.raises(ValueError, match=r"--best-of optim.wd: no configuration of this sweep sets it; they set "
                                         r"attention, optim.lr"):
        write_report(tmp_path, best_of=["optim.wd"])
    with pytest.raises(ValueError, match=r"--best-of seed: each configuration pools its seeds"):
        write_report(tmp_path, best_of=["seed"])  # swept, but never a setting: it said no configuration sets it


def test_best_of_breaks_a_tie_in_exact_match_by_val_loss() -> None:
    from gpt.sweeps.best_of import best_settings

    def seed(loss: float) -> dict:
        return {"status": "ok", "val_loss": loss, "val_acc": {"all": 0.004}}

    kept, _ = best_settings({("optim.lr=1e-3",): [seed(2.73)], ("optim.lr=3e-3",): [seed(2.60)]}, ["optim.lr"])
    assert kept == {("optim.lr=3e-3",)}


def test_best_of_names_the_values_whose_seeds_all_failed() -> None:
    """An LR that diverged in every seed was left out of the note's "also tried", and its failed rows out of the
    report: the note read as if the other value was the only one tried."""
    from gpt.sweeps.best_of import best_settings

    failed = {"status": "failed", "reason": "val loss became nan at step 3"}
    kept, notes = best_settings({("attention=a", "optim.lr=1e-1"): [failed, failed],
                                 ("attention=a", "optim.lr=1e-2"): [{"status": "ok", "val_loss": 1.0}]}, ["optim.lr"])
    assert kept == {("attention=a", "optim.lr=1e-2")}
    assert notes == ["- `attention=a`: best `optim.lr=1e-2` (val loss 1.0000); also tried `optim.lr=1e-1` failed"]


def test_no_matrix_without_groups(tmp_path: Path) -> None:
    fake_run(tmp_path / "0", ["attention=a", "seed=0"], {"status": "ok", "val_loss": 1.0})
    assert "Capability matrix" not in markdown(tmp_path, find_runs(tmp_path))


SWEEP = ["data=tasks", "trainer=debug", "trainer.max_steps=4", "trainer.val_check_interval=2", "model.layers=1",
         "model.dim=32", "data.train_lines=64", "data.val_lines=6", "data.batch_size=16", "logger=none",
         "attention=mha,sliding_window", "seed=0,1"]


@pytest.fixture(scope="module")
def task_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("task_sweep")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OMP_NUM_THREADS", "1")
        # One job at a time, in the sweep's own process (one start-up of torch, not one per worker): which jobs
        # run side by side is not what this checks.
        result = run_cli("train.py", "-m", f"hydra.sweep.dir={folder}", "hydra.launcher.n_jobs=1", *SWEEP,
                         cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    return folder


def test_tiny_task_sweep_reports_every_task_column_and_a_heatmap(task_sweep: Path) -> None:
    rows = matrix_rows((task_sweep / "report.md").read_text())
    header = rows["configuration"]
    assert header[1:] == ["recall_8", "copy", "distance_1_8", "distance_9_16", "distance_17_32", "distance_33_64"]
    chance = rows["*chance*"]
    assert chance[1] == f"*{100 / 8:.1f}*" or float(chance[1].strip("*")) >= 100 / 8  # 1 / distinct values present
    assert chance[2] == "*0.0*"  # copying exact match: each of the 16 copied tokens one of the 16, 16 ** -16
    for attention in ("mha", "sliding_window"):
        runs = [d for d in task_sweep.iterdir() if (d / "summary.json").is_file()
                and f"attention={attention}" in (d / ".hydra" / "overrides.yaml").read_text()]
        assert len(runs) == 2
        for column in header[1:]:
            values = [100 * json.loads((d / "summary.json").read_text())["val_acc"][column] for d in runs]
            cell = rows[f"attention={attention}"][header.index(column)].strip("*").removesuffix(" ▼")
            assert cell == f"{statistics.fmean(values):.1f} ± {statistics.stdev(values):.1f}"
    for figure in ("matrix.png", "levels.png"):  # levels: accuracy against the distance asked
        image = imread(task_sweep / figure)
        assert image.shape[0] > 100 and image.shape[1] > 300 and image[..., :3].std() > 0
    report = (task_sweep / "report.md").read_text()
    assert "### Per-token accuracy" in report and "![accuracy per level](levels.png)" in report
    (task_sweep / "matrix.png").unlink()
    write_report(task_sweep)
    assert (task_sweep / "matrix.png").is_file()


def test_expected_time_counts_the_jobs_the_command_line_leaves() -> None:
    from gpt.sweeps.parallel import sweep_sizes

    params = {"attention": "a,b,c", "seed": "0,1,2"}
    assert sweep_sizes(params, []) == {"attention": 3, "seed": 3}
    assert sweep_sizes(params, ["seed=0", "model.dim=32,64", "hydra.sweep.dir=x,y", "+data.tasks={copy: {}}"]) == \
        {"attention": 3, "seed": 1, "model.dim": 2, "data.tasks": 1}
    # recall_capacity's rows are a `+` key: naming some of them replaces the preset's, not multiplies them
    assert sweep_sizes({"+experiment/state": "mha,gqa,mqa", "seed": "0,1,2"}, ["+experiment/state=mha,gqa"]) == \
        {"experiment/state": 2, "seed": 3}


@pytest.mark.parametrize("preset, swept, registry", [("attention_tasks", "attention", "ATTENTION"),
                                                      ("position_tasks", "pos", "POSITIONAL"),
                                                      ("extrapolation", "pos", "POSITIONAL")])
def test_presets_sweep_every_variant_over_three_seeds(preset: str, swept: str, registry: str) -> None:
    from omegaconf import OmegaConf

    import gpt.model.attention
    import gpt.model.positional
    from tests.conftest import ROOT
    from tests.test_configs import compose_with

    cfg = compose_with(f"experiment={preset}")
    spec = OmegaConf.load(ROOT / "configs" / "experiment" / f"{preset}.yaml").hydra
    names = {"ATTENTION": gpt.model.attention.ATTENTION, "POSITIONAL": gpt.model.positional.POSITIONAL}[registry]
    swept_names = set(spec.sweeper.params[swept].split(","))
    fixes = [f"{verb} {','.join(sorted(differ))}" for verb, differ in (("add", set(names) - swept_names),
                                                                      ("drop", swept_names - set(names))) if differ]
    assert not fixes, f"configs/experiment/{preset}.yaml sweeps every {swept}= choice: {' and '.join(fixes)} in its " \
                      f"hydra.sweeper.params.{swept}"
    assert spec.sweeper.params.seed.split(",") == ["0", "1", "2"]
    timed = spec.callbacks.expected_time
    # one figure, one per precision, or one per CPU maker within a precision; each says where it was measured
    figures = timed.seconds_per_job
    seconds = [s for v in figures.values() for s in (v.values() if OmegaConf.is_dict(v) else [v])] \
        if OmegaConf.is_dict(figures) else [figures]

    def keys(node: Any) -> Any:  # the keys down to each figure
        return {k: keys(v) for k, v in node.items()} if OmegaConf.is_dict(node) else None

    assert keys(figures) == keys(timed.measured)
    assert all(s > 0 for s in seconds) and timed.steps == cfg.trainer.max_steps  # the steps it was timed at
    if preset == "extrapolation":  # trained at block 64, scored up to 8 times that
        assert cfg.model.block_size == 64 and list(cfg.callbacks.lengths.at) == [64, 128, 256, 512]
    else:
        assert "tasks" in cfg.data


UNBOUNDED = (-float("inf"), float("inf"))


@pytest.mark.parametrize("bounds, lowest, highest", [((0, 100), 0.0, 100.0), (UNBOUNDED, -9.8, 109.8)])
def test_a_seed_band_stays_within_what_a_percentage_can_be(bounds: tuple[float, float], lowest: float,
                                                           highest: float) -> None:
    """Exact match of 0, 0 and 40% (mean 13.3, std 23.1) drew its band down to -10% in levels.png."""
    from matplotlib.figure import Figure

    from gpt.sweeps.plots import band, curve_style
    from gpt.sweeps.scaling import mean_std

    ax = Figure().subplots()
    band(ax, [1, 2], *mean_std([[0.0, 0.0, 40.0], [100.0, 100.0, 60.0]]), "a", curve_style(0), bounds)
    ys = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert (round(ys.min(), 1), round(ys.max(), 1)) == (lowest, highest)


def test_levels_plot_chance_where_each_level_has_it() -> None:
    """Recall's chance falls with the pairs a line holds (53 / 35 / 22% at 4 / 8 / 16 pairs): levels.png drew one
    flat line at their mean. A copied answer of n tokens is guessed whole with chance ** n, not per-token chance."""
    from gpt.sweeps.scaling import levels_figure

    def seed(chance: float, tokens: int) -> dict[str, float]:
        return {"exact": 0.5, "token": 0.6, "prefix": 1.0, "tokens": tokens, "chance": chance}

    def summary(task: str, levels: dict[int, tuple[float, int]]) -> dict:
        return {"status": "ok", "val_levels": {task: {str(lv): seed(*c) for lv, c in levels.items()}}}

    figure = levels_figure({"attention=mha": [summary("recall", {4: (0.532, 1), 8: (0.353, 1), 16: (0.225, 1)}),
                                              summary("copy", {2: (0.5, 2), 4: (0.5, 4)})]})
    exact, token = (next(line for line in ax.get_lines() if line.get_label() == "chance")
                    for ax in figure.axes[3:5])
    recall = next(line for line in figure.axes[0].get_lines() if line.get_label() == "chance")
    assert list(recall.get_xdata()) == [4, 8, 16] and np.allclose(recall.get_ydata(), [53.2, 35.3, 22.5])
    assert list(exact.get_xdata()) == [2, 4] and np.allclose(exact.get_ydata(), [25.0, 6.25])  # 0.5 ** n
    assert np.allclose(token.get_ydata(), [50.0, 50.0])
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["attention=mha", "chance", "whole answer"]


def test_levels_plot_a_band_where_configurations_differ_in_chance_at_a_level() -> None:
    """Recall with 4 values and with 32 graded at the same pair counts: a guess at 8 pairs scores 47.4% on the
    first's lines, 35.3% on the second's, and levels.png drew one dashed line at their mean, which neither row has.
    The band spans both; at a level where the rows agree it closes to that one value."""
    from gpt.sweeps.scaling import levels_figure

    def summary(chances: dict[int, float]) -> dict:
        return {"status": "ok", "val_levels": {"recall": {str(level): {
            "exact": 0.5, "token": 0.5, "prefix": 1.0, "tokens": 1, "chance": c} for level, c in chances.items()}}}

    figure = levels_figure({"data.tasks.recall.values=4": [summary({4: 0.6, 8: 0.474})] * 2,
                            "data.tasks.recall.values=32": [summary({4: 0.6, 8: 0.353})]})
    ax = figure.axes[0]
    assert "chance" not in {line.get_label() for line in ax.get_lines()}
    (chance,) = [c for c in ax.collections if c.get_label().startswith("chance")]
    edges = chance.get_paths()[0].vertices
    assert sorted({round(y, 1) for x, y in edges if x == 8}) == [35.3, 47.4]
    assert {round(y, 1) for x, y in edges if x == 4} == {60.0}
    assert "chance (differs by configuration)" in [t.get_text() for t in figure.legends[0].get_texts()]


def test_levels_plot_ticks_its_levels_as_whole_numbers() -> None:
    """Levels are counts (pairs in a line, tokens back, tokens copied): a recall sweep at 4 and 8 pairs was ticked
    4.0, 4.5, 5.0, ..., pair counts no line holds."""
    from gpt.sweeps.scaling import levels_figure

    scores = {"exact": 0.5, "token": 0.5, "prefix": 1.0, "tokens": 1, "chance": 0.4}
    figure = levels_figure({"attention=mha": [{"status": "ok", "val_levels": {"recall": {"4": scores, "8": scores}}}]})
    ax = figure.axes[0]
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert ticks and all(t == int(t) for t in ticks) and {4, 8} <= set(ticks)


@pytest.mark.parametrize("order", [("x", "y", "z"), ("y", "x", "z")])
def test_a_tie_for_best_with_one_seed_does_not_hide_gaps_beyond_noise(order: tuple[str, ...]) -> None:
    """x (one seed) and y (two) tie at the ceiling, a common sight at 100%: z's gap to y is beyond noise, and which of
    the tied rows comes first must not decide the mark (x first made no claim, so z went unmarked)."""
    accuracy = {"x": [1.0], "y": [1.0, 1.0], "z": [0.5, 0.52]}
    loss = {"x": [1.0], "y": [1.0, 1.0], "z": [2.0, 2.1]}
    by_label = {f"attention={name}": [{"status": "ok", "val_acc": {"recall_8": a, "all": a},
                                       "val_extrapolation": {"trained": 8, "lengths": {"16": {"loss": l}}}}
                                      for a, l in zip(accuracy[name], loss[name])] for name in order}
    matrix = {line.split(" | ")[0]: line for line in capability.table(by_label, ["recall_8"], capability.EXACT)}
    assert matrix["| `attention=z`"].endswith(f"51.0 ± 1.4 {capability.BEYOND_NOISE} |")
    lengths = {line.split(" | ")[0]: line for line in scaling.extrapolation_markdown(by_label)}
    assert lengths["| `attention=z`"].startswith(f"| `attention=z` | 2.050 ± 0.071 {scaling.BEYOND_NOISE} |")


def test_loss_past_the_trained_length_names_the_trained_length_as_a_number() -> None:
    record = {"trained": 64, "lengths": {"128": {"loss": 2.0}}}
    by_label = {f"pos={pos}": [{"status": "ok", "val_extrapolation": record}] for pos in ("rope", "alibi")}
    legend = scaling.extrapolation_markdown(by_label)[-4]
    assert "trained at 64 tokens;" in legend  # it read "trained at [64] tokens", a Python list
