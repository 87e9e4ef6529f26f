"""Bits per byte: summed nats / ln 2 / the UTF-8 bytes of the text predicted, counted through each tokenizer's
bytes per token id; logged by LitGPT's validation and computed over a whole split by text_loss."""
from __future__ import annotations

import math

import lightning as L
import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader

from gpt import GPT, ModelConfig
from gpt.data.batches import IGNORE_INDEX
from gpt.data.tokenizers.base import Tokenizer
from gpt.data.tokenizers.bpe import BPETokenizer
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer
from gpt.data.tokenizers.hf import HFTokenizer
from gpt.data.tokenizers.vocab import CharTokenizer, WordTokenizer
from gpt.evaluation.bpb import byte_counts, text_loss
from gpt.training.lit import LitGPT
from tests.test_tokenizers import Texts

ASCII = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 8
UTF8 = "Ça fait déjà 10 €, señor; naïve 😀 jalapeño — 日本語 café.\n" * 6


def windows(ids: list[int], block: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    rows = torch.tensor([ids[s:s + block + 1] for s in range(0, len(ids) - block - 1, block)])  # (N, T + 1)
    return [(rows[i:i + 4, :-1], rows[i:i + 4, 1:]) for i in range(0, len(rows), 4)]


def validated(text: str, ignored: int = 0) -> tuple[dict[str, float], CharTokenizer,
                                                  list[tuple[torch.Tensor, torch.Tensor]]]:
    """`ignored`: targets of the first batch's rows set to IGNORE_INDEX, from each row's end."""
    tokenizer = CharTokenizer.fit(text)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=2, dim=16, block_size=16)
    lit = LitGPT(cfg, token_bytes=byte_counts(tokenizer))
    batches = windows(tokenizer.encode(text), cfg.block_size)
    if ignored:  # targets are a view of the rows the inputs are cut from
        targets = batches[0][1].clone()
        targets[:, -ignored:] = IGNORE_INDEX
        batches[0] = (batches[0][0], targets)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.validate(lit, DataLoader(batches, batch_size=None), verbose=False)
    return {k: float(v) for k, v in trainer.callback_metrics.items()}, tokenizer, batches


def test_char_model_on_ascii_text_has_bpb_equal_to_val_loss_over_ln2() -> None:
    metrics, _, _ = validated(ASCII)
    assert metrics["val/bpb"] == pytest.approx(metrics["val/loss"] / math.log(2), rel=1e-6)


def test_val_loss_is_the_mean_over_every_counted_target_as_bpb_is() -> None:
    # Task rows leave targets unscored, so batches count different numbers: a mean of each batch's mean then weighed
    # the sparse batch's targets more, and val/loss no longer matched val/bpb's nats on one-byte tokens.
    metrics, _, _ = validated(ASCII, ignored=14)
    assert metrics["val/bpb"] == pytest.approx(metrics["val/loss"] / math.log(2), rel=1e-6)


def test_multi_byte_characters_count_each_of_their_bytes_once() -> None:
    metrics, tokenizer, batches = validated(UTF8)
    targets = [t for _, target in batches for t in target.flatten().tolist()]
    text = tokenizer.decode(targets)
    assert len(text.encode()) > len(targets) + 50  # the check below would pass by chance on ASCII
    nats = metrics["val/loss"] * len(targets)  # equal-length windows: the batch mean is the token mean
    assert metrics["val/bpb"] == pytest.approx(nats / math.log(2) / len(text.encode()), rel=1e-5)


def byte_level(kind: str) -> Tokenizer:
    """GPT-2's BPE (full or compact), a BPE learned here, and that BPE as a Hugging Face folder's tokenizer."""
    if kind.startswith("gpt2"):
        full = GPT2Tokenizer()
        return full.compact(full.encode(UTF8) + [full.eot_id]) if kind == "gpt2 compact" else full
    bpe = BPETokenizer.learn(Texts([ASCII, UTF8]), 300)
    return bpe if kind == "bpe" else HFTokenizer(bpe.tok.to_str())


@pytest.mark.parametrize("kind", ["gpt2", "gpt2 compact", "bpe", "hf"])
def test_byte_level_pieces_that_split_a_character_count_its_real_bytes(kind: str) -> None:
    tokenizer = byte_level(kind)
    ids = tokenizer.encode(UTF8)
    counted = int(byte_counts(tokenizer)[torch.tensor(ids)].sum())
    as_decoded_alone = sum(len(tokenizer.decode([i]).encode()) for i in ids)
    assert as_decoded_alone != len(UTF8.encode())  # pieces of 😀 and 日本語 decode alone to U+FFFD
    assert counted == len(UTF8.encode())
    assert byte_counts(tokenizer)[tokenizer.eot_id] == 0  # the end-of-text between documents is no text


def test_word_bytes_match_the_decoded_text_of_lines_that_start_with_a_word() -> None:
    text = "two plus three equals five\nHello, wörld. Once more!\n"
    tokenizer = WordTokenizer.fit(text)
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert int(byte_counts(tokenizer)[torch.tensor(ids)].sum()) == len(text.encode())


@pytest.mark.parametrize("kind", [CharTokenizer, WordTokenizer])
def test_the_end_of_text_between_documents_counts_no_bytes(kind: type[Tokenizer]) -> None:
    # Counted as the 13 bytes of its name, a char model of short documents had its bytes inflated (19% on lines
    # of ~60 characters) and its bpb understated, beside byte-level models that count it 0.
    documents = ["two plus three\n", "Hello, world.\n"]
    tokenizer = kind.learn(Texts(documents), 0)
    ids = tokenizer.encode(documents[0]) + [tokenizer.eot_id] + tokenizer.encode(documents[1])
    assert int(byte_counts(tokenizer)[torch.tensor(ids)].sum()) == len("".join(documents).encode())


def test_text_loss_predicts_every_token_after_the_first_once() -> None:
    tokenizer = CharTokenizer.fit(UTF8)
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=2, dim=16, block_size=16)).eval()
    ids = np.array(tokenizer.encode(UTF8)[:16 * 5 + 7])  # five full windows and a short one
    loss, bpb = text_loss(model, ids, byte_counts(tokenizer), batch_size=2)
    with torch.no_grad():  # one long sequence predicted window by window, written out
        nats = sum(F.cross_entropy(model(torch.tensor(ids[s:e])[None])[0], torch.tensor(ids[s + 1:e + 1]),
                                   reduction="sum").item()
                   for s in range(0, len(ids) - 1, 16) for e in [min(s + 16, len(ids) - 1)])
    text = tokenizer.decode(ids[1:].tolist())
    assert loss == pytest.approx(nats / (len(ids) - 1), rel=1e-5)
    assert bpb == pytest.approx(nats / math.log(2) / len(text.encode()), rel=1e-5)
