"""bench/step_profile.py refuses what it cannot profile in one line, before building either model."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import step_profile  # noqa: E402


def test_a_folder_that_is_not_nanogpt_is_refused_in_one_line(tmp_path: Path) -> None:
    """--nanogpt naming no checkout ended in a FileNotFoundError traceback for its model.py."""
    (tmp_path / "input.txt").write_text("to be or not to be")
    with pytest.raises(SystemExit, match="is not a nanoGPT checkout"):
        step_profile.main(["--nanogpt", str(tmp_path / "nope"), "--corpus", str(tmp_path / "input.txt")])


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--rounds", "0"]])
def test_nothing_to_time_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        step_profile.parse_args(["--nanogpt", "nope", "--corpus", "input.txt", *argv])


# A stand-in for nanoGPT's model.py, with the names and calls step_profile makes of it: one embedding and a head.
STAND_IN = '''
from dataclasses import dataclass
import torch
@dataclass
class GPTConfig:
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    vocab_size: int
    dropout: float
    bias: bool
class GPT(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = torch.nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.head = torch.nn.Linear(cfg.n_embd, cfg.vocab_size)
    def forward(self, x, y):
        logits = self.head(self.wte(x))
        return logits, torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
    def configure_optimizers(self, weight_decay, lr, betas, device):
        return torch.optim.AdamW(self.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
'''


def stand_in_checkout(folder: Path) -> Path:
    (folder / "config").mkdir(parents=True)
    (folder / "config/train_shakespeare_char.py").write_text("")
    (folder / "train.py").write_text("")
    (folder / "model.py").write_text(STAND_IN)
    return folder


def test_the_vocabulary_is_the_corpus_characters(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A fixed 65 (Tiny Shakespeare's) failed in the embedding, 'index out of range in self', on a corpus of more."""
    corpus = tmp_path / "input.txt"
    corpus.write_text("".join(chr(c) for c in range(33, 133)) * 30)  # 100 characters
    step_profile.main(["--nanogpt", str(stand_in_checkout(tmp_path / "nanoGPT")), "--corpus", str(corpus),
                       "--steps", "1", "--warmup", "0", "--rounds", "1"])
    assert "tinygpt's step against nanoGPT's" in capsys.readouterr().out


def test_a_corpus_shorter_than_a_window_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "input.txt").write_text("to be or not to be")
    with pytest.raises(SystemExit, match=r"^error: --corpus .+: its training 90% is 16 characters, and a window of "
                                         r"context \d+ needs more"):
        step_profile.main(["--nanogpt", str(stand_in_checkout(tmp_path / "nanoGPT")), "--corpus",
                           str(tmp_path / "input.txt")])
