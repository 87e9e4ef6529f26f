"""bench/prepare_speed.py writes its corpora and shards into --dir, and removes only what it wrote there."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import prepare_speed  # noqa: E402


def test_a_given_dir_keeps_what_was_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--dir was removed whole after the run: a folder of the user's lost every file it held."""
    (tmp_path / "notes.txt").write_text("mine")
    written = []

    def generate(path: Path, megabytes: int) -> None:
        written.append(path)
        raise KeyboardInterrupt  # the run stopped during its first corpus: the clean-up still runs

    monkeypatch.setattr(prepare_speed, "generate", generate)
    with pytest.raises(KeyboardInterrupt):
        prepare_speed.main(["--sizes", "1", "--dir", str(tmp_path)])
    assert written[0].parent.parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"] and (tmp_path / "notes.txt").read_text() == "mine"
