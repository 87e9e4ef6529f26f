"""Capacity against state size: the report's section and capacity.png place each configuration at its attention
state by the variant's formula, only when the sweep varies state on recall; experiment=recall_capacity composes
each of its rows; a tiny trainer=debug run of the preset draws the figure."""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread
from omegaconf import OmegaConf

from gpt.data.tasks.datamodule import TaskData
from gpt.sweeps import capacity
from gpt.sweeps.plots import styles
from gpt.sweeps.report import markdown
from gpt.sweeps.runs import find_runs, summaries
from tests.conftest import ROOT, run_cli
from tests.test_configs import compose_with
from tests.test_report import fake_run

MODEL = {"vocab_size": 70, "layers": 2, "heads": 4, "dim": 64, "block_size": 34, "pos": "rope"}


def fake_sweep(folder: Path, rows: dict[str, tuple[dict, list[float]]]) -> dict[str, list[dict]]:
    """One fake run per seed of each row (its overrides: model settings and accuracies at 8 pairs)."""
    i = 0
    for overrides, (model, accuracies) in rows.items():
        for acc in accuracies:
            fake_run(folder / str(i), [*overrides.split(), f"seed={i}"],
                     {"status": "ok", "val_loss": 1.0, "params": 1000, "model": {**MODEL, **model},
                      "val_acc": {"recall_2": 1.0, "recall_8": acc, "all": acc}, "val_chance": {"recall_8": 0.15}})
            i += 1
    return summaries(find_runs(folder))


def test_state_bytes_are_each_variants_formula_at_the_trained_block(tmp_path: Path) -> None:
    by_label = fake_sweep(tmp_path, {
        "attention=linear model.linear_features=2": ({"attention": "linear", "linear_features": 2}, [0.3, 0.4]),
        "attention=linear model.linear_features=8": ({"attention": "linear", "linear_features": 8}, [0.7, 0.9]),
        "attention=mha": ({"attention": "mha"}, [1.0, 0.98]),
    })
    # By hand, fp32, 2 layers of 4 heads of width 16: linear keeps features x (16 + 1) per head at any length;
    # mha keeps a key and a value of 16 per head for each of the 34 positions.
    linear_2, linear_8, mha = 2 * 4 * 2 * 17 * 4, 2 * 4 * 8 * 17 * 4, 2 * 4 * 34 * 2 * 16 * 4
    assert (linear_2, mha) == (1088, 34816)
    assert capacity.states(by_label) == {"attention=linear model.linear_features=2": ("linear", linear_2),
                                         "attention=linear model.linear_features=8": ("linear", linear_8),
                                         "attention=mha": ("mha", mha)}
    section = "\n".join(capacity.markdown(by_label))
    assert "| `attention=mha` | mha | 34,816 |" in section and "![" in section
    assert section.index("linear_features=2") < section.index("linear_features=8") < section.index("attention=mha")
    fig = capacity.figure(by_label)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(" (")[0] for ax in axes] == ["2 pairs", "8 pairs"]
    lines = {c.get_label(): c.lines[0] for c in axes[1].containers}  # errorbar: the data line of each label
    assert list(lines["linear"].get_xdata()) == [linear_2, linear_8]  # one variant's sizes joined, by size
    assert list(lines["linear"].get_ydata()) == pytest.approx([35.0, 80.0])
    assert lines["linear"].get_linestyle() == "-" and lines["mha"].get_linestyle() == "None"
    assert list(lines["mha"].get_xdata()) == [mha]
    chance = next(line for line in axes[1].get_lines() if line.get_label() == "chance")
    assert list(chance.get_ydata()) == pytest.approx([15.0, 15.0])
    assert "chance" not in {line.get_label() for line in axes[0].get_lines()}  # 2 pairs: no guess recorded
    assert "shaded" not in section  # one chance per column: no band to explain


def test_chance_that_differs_between_configurations_is_a_band_not_a_line_at_their_mean(tmp_path: Path) -> None:
    """A sweep of recall's values keeps the column recall_8 but changes what guessing scores there (47.4% with 4
    values, 35.3% with 32): one dashed line at their mean, 41.4%, lay where no configuration's guess does."""
    for i, (features, values, chance) in enumerate([(2, 4, 0.474), (8, 32, 0.353), (8, 32, 0.353)]):
        fake_run(tmp_path / str(i), ["attention=linear", f"model.linear_features={features}",
                                     f"data.tasks.recall.values={values}", f"seed={i}"],
                 {"status": "ok", "val_loss": 1.0, "params": 1000,
                  "model": {**MODEL, "attention": "linear", "linear_features": features},
                  "val_acc": {"recall_8": 0.4, "all": 0.4}, "val_chance": {"recall_8": chance}})
    ax = capacity.figure(summaries(find_runs(tmp_path))).axes[0]
    assert "chance" not in {line.get_label() for line in ax.get_lines()}
    (band,) = [p for p in ax.patches if p.get_label().startswith("chance")]
    assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((35.3, 47.4))
    assert "chance (differs by configuration)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "shaded between dashed bounds" in "\n".join(capacity.markdown(summaries(find_runs(tmp_path))))


def test_linear_attention_with_a_convolution_is_its_own_line(tmp_path: Path) -> None:
    """Points of linear attention with a short convolution are not joined with those without one: the line of a
    variant's state sizes would zig-zag between two mechanisms."""
    by_label = fake_sweep(tmp_path, {
        "state=linear_2": ({"attention": "linear", "linear_features": 2, "linear_conv": 4}, [0.1]),
        "state=linear_8": ({"attention": "linear", "linear_features": 8, "linear_conv": 4}, [0.9]),
        "state=linear_8_no_conv": ({"attention": "linear", "linear_features": 8}, [0.3]),
    })
    found = capacity.states(by_label)
    assert {label: name for label, (name, _) in found.items()} == {
        "state=linear_2": "linear + conv 4", "state=linear_8": "linear + conv 4", "state=linear_8_no_conv": "linear"}
    # The convolution keeps its last 3 inputs of 64 channels in each of the 2 layers, 4 bytes each.
    assert found["state=linear_8"][1] - found["state=linear_8_no_conv"][1] == 2 * 3 * 64 * 4
    lines = {c.get_label(): len(c.lines[0].get_xdata()) for c in capacity.figure(by_label).axes[0].containers}
    assert lines == {"linear + conv 4": 2, "linear": 1}


def test_a_variant_has_its_first_configurations_colour_of_the_other_figures(tmp_path: Path) -> None:
    by_label = fake_sweep(tmp_path, {
        "attention=gqa": ({"attention": "gqa"}, [1.0]),
        "attention=linear model.linear_features=2": ({"attention": "linear", "linear_features": 2}, [0.3]),
        "attention=linear model.linear_features=8": ({"attention": "linear", "linear_features": 8}, [0.8]),
        "attention=mha": ({"attention": "mha"}, [1.0]),
    })
    colours = {c.get_label(): to_rgb(c.lines[0].get_color()) for c in capacity.figure(by_label).axes[0].containers}
    style_of = styles(by_label)  # loss.png's, pareto.png's and levels.png's
    assert colours == {"gqa": to_rgb(style_of["attention=gqa"]["color"]),
                       "linear": to_rgb(style_of["attention=linear model.linear_features=2"]["color"]),
                       "mha": to_rgb(style_of["attention=mha"]["color"])}


def test_error_bars_stay_within_0_and_100_percent(tmp_path: Path) -> None:
    by_label = fake_sweep(tmp_path, {
        "attention=linear model.linear_features=2": ({"attention": "linear", "linear_features": 2}, [0.0, 0.1]),
        "attention=linear model.linear_features=8": ({"attention": "linear", "linear_features": 8}, [1.0, 0.9]),
    })
    bars = next(c for c in capacity.figure(by_label).axes[1].containers if c.get_label() == "linear").lines[2][0]
    ends = [y for segment in bars.get_segments() for _, y in segment]
    assert min(ends) == 0.0 and max(ends) == 100.0  # 5 ± 7.1 and 95 ± 7.1 reached -2.1% and 102.1%


def test_a_point_of_one_seed_draws_no_error_bar(tmp_path: Path) -> None:
    """A seed alone drew a bar of 0, its caps through the point, under a title of "mean ± std over seeds": a spread
    no run measured, read as seeds that agree."""
    by_label = fake_sweep(tmp_path, {
        "attention=linear model.linear_features=2": ({"attention": "linear", "linear_features": 2}, [0.3]),
        "attention=linear model.linear_features=8": ({"attention": "linear", "linear_features": 8}, [0.7, 0.9]),
    })
    ax = capacity.figure(by_label).axes[1]
    bars = next(c for c in ax.containers if c.get_label() == "linear").lines[2][0]
    assert [[x for x, _ in segment] for segment in bars.get_segments()] == [[], [1088 * 4] * 2]
    assert ax.get_title() == "8 pairs (mean ± std over seeds)"
    by_label = fake_sweep(tmp_path / "one", {
        "attention=linear model.linear_features=2": ({"attention": "linear", "linear_features": 2}, [0.3]),
        "attention=linear model.linear_features=8": ({"attention": "linear", "linear_features": 8}, [0.7]),
    })
    assert capacity.figure(by_label).axes[1].get_title() == "8 pairs (one seed each, no spread)"


def test_no_capacity_figure_unless_a_variant_varies_its_state(tmp_path: Path) -> None:
    by_label = fake_sweep(tmp_path, {"attention=mha": ({"attention": "mha"}, [1.0]),
                                     "attention=gqa": ({"attention": "gqa"}, [0.9])})
    assert capacity.states(by_label) == {} and capacity.figure(by_label) is None
    assert "Capacity against state size" not in markdown(tmp_path, find_runs(tmp_path))


def test_recall_capacity_preset_runs_each_row_once_over_three_seeds() -> None:
    preset = OmegaConf.load(ROOT / "configs" / "experiment" / "recall_capacity.yaml")
    spec = preset.hydra
    rows = spec.sweeper.params["+experiment/state"].split(",")
    assert sorted(rows) == sorted(p.stem for p in (ROOT / "configs" / "experiment" / "state").glob("*.yaml"))
    assert spec.sweeper.params.seed.split(",") == ["0", "1", "2"] and spec.callbacks.expected_time.seconds_per_job > 0
    assert spec.callbacks.expected_time.steps == preset.trainer.max_steps  # the steps it was timed at
    found = {}
    for row in rows:
        cfg = compose_with("experiment=recall_capacity", f"+experiment/state={row}")
        found[row] = (cfg.model.attention, cfg.model.get("linear_features"))
        data = TaskData(OmegaConf.to_container(cfg.data.tasks), train_lines=8, val_lines=8)
        assert len(data.tasks[0].counts) > 1 and data.max_tokens <= cfg.model.block_size
    assert {found[r][0] for r in rows} == {"mha", "gqa", "mqa", "mla", "linear"}
    features = [f for attention, f in found.values() if attention == "linear"]
    assert features == sorted(features) and len(set(features)) >= 3


SWEEP = ["experiment=recall_capacity", "trainer=debug", "trainer.max_steps=4", "trainer.val_check_interval=2",
         "model.layers=1", "model.heads=2", "model.dim=16", "data.train_lines=64", "data.val_lines=8",
         "data.batch_size=16", "logger=none", "+experiment/state=linear_2,linear_4", "seed=0,1"]


def test_a_debug_sweep_of_the_preset_draws_recall_against_state(tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OMP_NUM_THREADS", "1")
        # One job at a time, in the sweep's own process (one start-up of torch, not one per worker): which jobs
        # run side by side is not what this checks.
        result = run_cli("train.py", f"hydra.sweep.dir={tmp_path}", "hydra.launcher.n_jobs=1", *SWEEP,
                         cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    report = (tmp_path / "report.md").read_text()
    section = report[report.index("## Capacity against state size"):].split("\n\n")[1].splitlines()
    # One layer of 2 heads of width 8 holds features x (8 + 1) numbers per head, and the convolution of width 4 its
    # last 3 inputs of 16 channels, 4 bytes each.
    assert section[2:] == ["| `+experiment/state=linear_2` | linear + conv 4 | 336 |",
                           "| `+experiment/state=linear_4` | linear + conv 4 | 480 |"]
    runs = [r for r in find_runs(tmp_path) if "+experiment/state=linear_2" in r.overrides]
    assert len(runs) == 2 and all(r.ok for r in runs)
    mean = statistics.fmean(100 * r.summary["val_acc"]["recall_4"] for r in runs)
    points = next(c for c in capacity.figure(summaries(find_runs(tmp_path))).axes[0].containers
                  if c.get_label() == "linear + conv 4")
    assert points.lines[0].get_ydata()[0] == pytest.approx(mean)
    image = imread(tmp_path / "capacity.png")
    assert image.shape[1] > 600 and image[..., :3].std() > 0


def test_state_sizes_within_two_octaves_are_ticked_at_each_size(tmp_path: Path) -> None:
    """linear_2 against linear_4 alone (5,184 and 7,296 bytes with their convolution) lie between two powers of two:
    the axis showed no number at all."""
    by_label = fake_sweep(tmp_path, {
        "attention=linear model.linear_features=2": ({"attention": "linear", "linear_features": 2}, [0.3]),
        "attention=linear model.linear_features=3": ({"attention": "linear", "linear_features": 3}, [0.5]),
    })
    ax = capacity.figure(by_label).axes[1]
    ax.figure.canvas.draw()
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and ax.get_xlim()[0] <= t.get_position()[0]
             <= ax.get_xlim()[1]]
    assert shown == ["1,088", "1,632"]
    wide = capacity.figure(fake_sweep(tmp_path / "wide", {
        "attention=linear model.linear_features=2": ({"attention": "linear", "linear_features": 2}, [0.3]),
        "attention=mha": ({"attention": "mha"}, [1.0]),
        "attention=linear model.linear_features=8": ({"attention": "linear", "linear_features": 8}, [0.8]),
    })).axes[1]
    wide.figure.canvas.draw()
    assert "4,096" in [t.get_text() for t in wide.get_xticklabels()]  # powers of two, written as bytes


def test_configurations_of_a_variant_at_one_state_size_are_not_joined(tmp_path: Path) -> None:
    """A sweep of recall's values beside the state: one line through the variant's four points zig-zagged between
    4 and 32 values at each size; each configuration is its own point, named as in the other figures."""
    by_label = fake_sweep(tmp_path, {
        f"model.linear_features={f} data.tasks.recall.values={v}": ({"attention": "linear", "linear_features": f},
                                                                     [acc])
        for f, v, acc in [(2, 4, 0.3), (8, 4, 0.9), (2, 32, 0.05), (8, 32, 0.2)]})
    containers = capacity.figure(by_label).axes[1].containers
    assert sorted(c.get_label() for c in containers) == sorted(by_label)
    assert all(len(c.lines[0].get_xdata()) == 1 and c.lines[0].get_linestyle() == "None" for c in containers)
    colours = {c.get_label(): to_rgb(c.lines[0].get_color()) for c in containers}
    assert colours == {label: to_rgb(style["color"]) for label, style in styles(by_label).items()}
