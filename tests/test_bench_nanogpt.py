"""bench/quality_per_time.py against real nanoGPT: its printed log parsed into history and speed, nanoGPT's
90/10 character split, a model.pt measured on a text, and the table's nanoGPT column only beside nanoGPT, all
without running nanoGPT."""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from gpt import GPT, ModelConfig
from gpt.data.tokenizers.vocab import CharTokenizer
from gpt.inference.checkpoint import save_model
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import nanogpt  # noqa: E402
import quality_per_time  # noqa: E402

# nanoGPT's own lines (its train.py and model.py print these), two evaluations 3 iterations apart.
LOG = """\
tokens per iteration will be: 768
number of parameters: 0.80M
num decayed parameter tensors: 18, with 802,944 parameters
num non-decayed parameter tensors: 9, with 1,152 parameters
using fused AdamW: False
step 0: train loss 4.1676, val loss 4.1649
iter 0: loss 4.1828, time 900.00ms, mfu -100.00%
iter 1: loss 4.1373, time 50.00ms, mfu -100.00%
iter 2: loss 4.1347, time 40.00ms, mfu -100.00%
step 3: train loss 3.9000, val loss 3.9500
saving checkpoint to out-shakespeare-char
iter 3: loss 3.9904, time 540.00ms, mfu 0.02%
iter 4: loss 3.9804, time 90.00ms, mfu 0.02%
"""


def test_nanogpt_log_gives_history_speed_and_size() -> None:
    result = nanogpt.parse_log(LOG)
    # Training iterations are those that did not evaluate (1, 2 and 4): 60 ms on average. An evaluating
    # iteration's time less one training step (their median, 50 ms) is when its evaluation ended.
    assert result["ms_per_step"] == pytest.approx(60.0)
    assert result["tokens_per_s"] == pytest.approx(768 * 3 / 0.180)
    assert [row["step"] for row in result["history"]] == [0, 3]
    assert [row["wall_s"] for row in result["history"]] == pytest.approx([0.85, 1.48])
    assert [row["val_loss"] for row in result["history"]] == [4.1649, 3.95]
    assert (result["steps"], result["val_loss"], result["wall_s"]) == (3, 3.95, pytest.approx(1.48))
    assert result["params"] == 802_944 + 1_152
    assert result["val_bpb"] == pytest.approx(3.95 / math.log(2))
    assert nanogpt.parse_log(LOG, ascii_corpus=False)["val_bpb"] is None


def test_a_log_without_nanogpts_lines_is_refused() -> None:
    with pytest.raises(ValueError, match="no nanoGPT"):
        nanogpt.parse_log("Traceback (most recent call last):\n")


def test_a_folder_that_is_not_nanogpt_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="is not a nanoGPT checkout"):
        nanogpt.check_checkout(tmp_path)


def test_split_is_nanogpts_first_ninety_and_last_ten_percent_of_the_characters(tmp_path: Path) -> None:
    corpus = tmp_path / "input.txt"
    corpus.write_text("abcdefghij" * 3 + "é", encoding="utf-8")  # 31 characters, 32 bytes: the cut counts characters
    data, held_out = quality_per_time.split_texts(corpus, tmp_path / "split")
    paths = dict(override.split("=", 1) for override in data)
    assert Path(paths["data.path"]).read_text(encoding="utf-8") == "abcdefghij" * 2 + "abcdefg"  # int(31 * 0.9) = 27
    assert Path(paths["data.val_path"]).read_text(encoding="utf-8") == held_out == "hijé"


def test_text_loss_is_the_mean_over_every_window(tmp_path: Path) -> None:
    torch.manual_seed(0)
    text = "to be or not to be, that is the question\n" * 3
    tokenizer = CharTokenizer.fit(text)
    model = GPT(ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=2, dim=16, block_size=8)).eval()
    save_model(tmp_path / "model.pt", model, tokenizer, meta={})
    ids = torch.tensor(tokenizer.encode(text))
    count = (len(ids) - 1) // 8
    inputs, targets = ids[:count * 8].view(count, 8), ids[1:count * 8 + 1].view(count, 8)
    with torch.no_grad():
        expected = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten()).item()
    assert quality_per_time.text_loss(tmp_path / "model.pt", text, batch_size=5) == pytest.approx(expected, rel=1e-5)


FAKE_MODEL = '''
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class GPTConfig:
    block_size: int
    vocab_size: int


class GPT(nn.Module):  # nanoGPT's interface: logits for every position when given targets
    def __init__(self, config):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, idx, targets=None):
        return self.bias.expand(*idx.shape, -1), None
'''


def test_nanogpts_final_checkpoint_is_scored_on_every_window_through_its_own_model_code(tmp_path: Path) -> None:
    checkout = tmp_path / "nanoGPT"
    (checkout / nanogpt.DATA).mkdir(parents=True)
    (checkout / "model.py").write_text(FAKE_MODEL)
    ids = np.random.default_rng(0).integers(0, 5, 1000, dtype=np.uint16)
    ids.tofile(checkout / nanogpt.DATA / "val.bin")
    bias = torch.tensor([0.5, -1.0, 2.0, 0.0, 1.0])
    torch.save({"iter_num": 2000, "model_args": {"block_size": 8, "vocab_size": 5},
                "model": {"_orig_mod.bias": bias}}, tmp_path / "ckpt.pt")  # as a compiled run saves it
    count = (len(ids) - 1) // 8  # 124 windows of 8: the last 7 ids are no window's targets
    targets = torch.from_numpy(ids[1:count * 8 + 1].astype(np.int64))
    expected = F.cross_entropy(bias.expand(len(targets), -1), targets).item()
    assert nanogpt.final_val_loss(checkout, tmp_path, steps=2000, batch_size=50) == pytest.approx(expected)
    assert math.isnan(nanogpt.final_val_loss(checkout, tmp_path, steps=2500))  # saved before the end: no figure


def test_nanogpts_data_is_prepared_again_from_a_different_corpus(tmp_path: Path) -> None:
    """Prepared once, nanoGPT's train.bin was kept for every later --corpus: nanoGPT trained on the earlier text
    while tinygpt trained on the one given."""
    folder = tmp_path / "nanoGPT" / nanogpt.DATA
    folder.mkdir(parents=True)
    # nanoGPT's prepare.py stood in for: its train.bin from its input.txt
    (folder / "prepare.py").write_text("import shutil\nshutil.copyfile('input.txt', 'train.bin')\n")
    for text in ("first corpus", "second corpus", "second corpus"):
        (tmp_path / "corpus.txt").write_text(text)
        nanogpt.prepare(tmp_path / "nanoGPT", tmp_path / "corpus.txt")
        assert (folder / "train.bin").read_text() == text


def test_a_configuration_train_py_refuses_ends_the_bench_in_one_line(tmp_path: Path) -> None:
    """train.py's own one-line reason was followed by a CalledProcessError traceback of the bench."""
    with pytest.raises(SystemExit, match=r"^error: train.py model.head=4 failed \(exit 2\)$"):
        quality_per_time.run(["model.head=4"], [], tmp_path / "run")


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--seeds", "0"]])
def test_nothing_to_run_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        quality_per_time.parse_args(["--corpus", "input.txt", "experiment=shakespeare_char_cpu", *argv])


def test_a_missing_corpus_is_refused_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^error: --corpus no_such_file.txt: no such file$"):
        quality_per_time.main(["--corpus", "no_such_file.txt", "--out", str(tmp_path), "experiment=x"])


def fake_run(config: str, args: object, data: list[str], held_out: str | None, seed: int,
             run_dir: Path) -> dict[str, object]:
    """One run's figures as run_one gives them, without training: 'nanogpt_val' only when scored on nanoGPT's text."""
    run_dir.mkdir(parents=True)
    history = [{"step": 0.0, "wall_s": 1.0, "val_loss": 2.5}, {"step": 10.0, "wall_s": 2.0, "val_loss": 1.5}]
    result = {"history": history, "process_s": 3.0, "params": 1000, "steps": 10, "ms_per_step": 100.0,
              "tokens_per_s": 500.0, "wall_s": 2.0, "val_loss": 1.5, "val_bpb": 2.2}
    return {**result, "nanogpt_val": 1.6} if held_out is not None else result


@pytest.mark.parametrize("with_nanogpt", [False, True])
def test_the_nanogpt_val_column_is_there_only_with_nanogpt(
        with_nanogpt: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Without --nanogpt no run is scored on nanoGPT's text, yet the table printed a 'nanoGPT val' column of nan."""
    corpus = tmp_path / "input.txt"
    corpus.write_text("to be or not to be\n" * 10, encoding="utf-8")
    monkeypatch.setattr(quality_per_time, "run_one", fake_run)
    monkeypatch.setattr(nanogpt, "check_checkout", lambda checkout: None)
    nanogpt_args = ["--nanogpt", str(tmp_path / "nanoGPT")] if with_nanogpt else []
    quality_per_time.main(["--corpus", str(corpus), "--out", str(tmp_path / "out"), *nanogpt_args, "experiment=a"])
    out = capsys.readouterr().out
    table = out[out.index("configuration"):]
    assert not re.search(r"\bnan\b", table)
    assert ("nanoGPT val" in table) == with_nanogpt
    assert (" 1.6000 " in table) == with_nanogpt  # fake_run's score on nanoGPT's text, in each row
