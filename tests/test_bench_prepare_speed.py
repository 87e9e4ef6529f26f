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


@pytest.mark.parametrize("flags, says", [
    (["--tokenizers", "gpt3"], "'gpt3' is none of char, word, gpt2, bpe nor a model folder"),
    (["--sizes", "0"], "must be a positive integer, not '0'"),
    (["--procs", "0"], "must be a positive integer, not '0'"),
    (["--tokenizers", "bpe", "--vocab-size", "10"], "--vocab-size 10 is too small for the byte-level BPE: give 258"),
])
def test_a_bad_argument_is_refused_before_any_corpus(flags: list[str], says: str, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    """Each of these first generated a corpus, then printed only 'failed: <command>' with no reason."""
    monkeypatch.setattr(prepare_speed, "generate", lambda path, megabytes: pytest.fail("a corpus was generated"))
    with pytest.raises(SystemExit):
        prepare_speed.main(flags)
    assert says in capsys.readouterr().err


def test_a_failed_prepare_shows_its_own_last_error_line() -> None:
    command = [sys.executable, "-c", "import sys; print('working', file=sys.stderr); sys.exit('error: no room left')"]
    with pytest.raises(SystemExit) as stopped:
        prepare_speed.peak_memory(command)
    assert str(stopped.value).startswith("error: ") and str(stopped.value).endswith("failed: error: no room left")
