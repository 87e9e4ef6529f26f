"""The learners' notebook runs top to bottom in a fresh kernel (every assert_close in it holds for this code), and
the committed copy shows the outputs of one such run, so it reads well on a repository page."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT, child_env

NOTEBOOK = ROOT / "notebooks" / "attention_from_scratch.ipynb"


def outputs_of(nb: nbformat.NotebookNode, kind: str) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs if out.output_type == kind]


def test_committed_notebook_shows_one_clean_run() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))  # top to bottom, once
    assert not outputs_of(nb, "error")
    assert len([out for out in outputs_of(nb, "display_data") if "image/png" in out.data]) >= 3
    assert not broken_pictures(nb)


def broken_pictures(nb: nbformat.NotebookNode) -> list[str]:
    """Pictures a shown Markdown output (the sweep report) links by a path relative to its own folder, which a
    notebook page resolves against the notebook's and so draws as a broken image."""
    shown = "".join(out.data.get("text/markdown", "") for out in outputs_of(nb, "display_data"))
    return re.findall(r"!\[[^\]]*\]\([^)]+\)", shown)


def test_notebook_runs_top_to_bottom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few training steps only: this checks that every cell runs and every claim in it holds, not accuracy."""
    monkeypatch.setenv("TINYGPT_NOTEBOOK_STEPS", "40")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's files (its sweep's runs) land in pytest's tmp_path
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # tiny models run fastest on one thread; the cores are shared
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    text = "".join(out.get("text", "") for out in outputs_of(nb, "stream"))
    assert "after 40 steps: validation loss" in text
    for variant in ("mha", "linear", "weightless"):  # the sweep report was read back, one row per variant
        assert f"attention={variant}" in text
    assert len([out for out in outputs_of(nb, "display_data") if "image/png" in out.data]) >= 3
    assert len(list(tmp_path.glob("tinygpt-notebook-*/sweep/*/model.pt"))) == 3
    assert not broken_pictures(nb)
    for history in tmp_path.glob("tinygpt-notebook-*/sweep/*/history.csv"):  # loss.png draws curves, not dots
        assert len(history.read_text().splitlines()) - 1 > 1, history
