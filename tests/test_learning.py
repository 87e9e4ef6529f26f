"""The generation check: causal attention must let a model learn arithmetic it can answer by greedy
decoding on problems it never saw, and the check must catch a broken (leaky) causal mask. The causal model is
trained once per session (the `learned_calculator` fixture of conftest.py): the README's snippet runs on it too."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import lightning as L
import pytest
import torch

from gpt.data.tasks import Example
from gpt.data.tasks.datamodule import TaskData, held_out
from gpt.evaluation.grading import grade, scores_by_group
from gpt.inference.text import TextModel
import gpt.model.attention.base
from gpt.model.config import ModelConfig
from gpt.training.lit import LitGPT
from tests.conftest import calculator_data

OPERATIONS = ["plus", "minus"]
STEPS = 600  # the default run's: Muon learns plus and minus to 99% in these (AdamW took 2,000)


def leaky_mask(q_len: int, k_len: int, start: int, device: torch.device) -> torch.Tensor:
    """Every position sees every other, the future included: the bug the check must catch."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device)


def majority_accuracy(train: list[Example], held_out: list[Example], op: str) -> float:
    """Accuracy of always answering the commonest training answer: what a model that ignores the question gets."""
    commonest = Counter(e.target for e in train if e.group == op).most_common(1)[0][0]
    mine = [e for e in held_out if e.group == op]
    return sum(e.target == commonest for e in mine) / len(mine)


def train_and_grade(data: TaskData) -> tuple[float, dict[str, float], TextModel]:
    """(final training loss, held-out accuracy per operation, the model) after STEPS steps."""
    L.seed_everything(0, verbose=False)
    # The written-out maths, whose mask the leak check swaps (torch's fused kernel applies its own causal mask).
    cfg = ModelConfig(vocab_size=data.vocab_size, layers=2, heads=4, dim=64, block_size=data.max_tokens, kernel="math")
    lit = LitGPT(cfg, max_steps=STEPS)  # the default optimizer: Muon, at the default run's LRs
    trainer = L.Trainer(max_steps=STEPS, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=0, gradient_clip_val=1.0)
    trainer.fit(lit, datamodule=data)
    final_loss = float(trainer.callback_metrics["train/loss"])
    text_model = TextModel(lit.model, data.tokenizer, data.meta)
    scores = scores_by_group(grade(lit.model, data.tokenizer, held_out(data.meta, "test")))
    return final_loss, {group: s["exact"] for group, s in scores.items()}, text_model


@pytest.mark.slow
def test_causal_model_answers_unseen_problems_and_a_leaky_mask_is_caught(
        learned_calculator: tuple[Path, float, dict[str, float]], monkeypatch: pytest.MonkeyPatch) -> None:
    data = calculator_data(batch_size=128, operations=OPERATIONS)
    train, test = ([e for line in lines for e in line.examples]
                   for lines in (data.splits["train"], held_out(data.meta, "test")))
    chance = {op: majority_accuracy(train, test, op) for op in OPERATIONS}
    bar = {op: 20 * max(chance[op], 1 / len(test)) for op in OPERATIONS}  # "well above chance"

    _, causal_loss, causal_accuracy = learned_calculator
    monkeypatch.setattr(gpt.model.attention.base, "causal_mask", leaky_mask)
    leaky_loss, leaky_accuracy, _ = train_and_grade(data)

    for op in OPERATIONS:
        assert causal_accuracy[op] > bar[op], (op, causal_accuracy, bar)
        assert leaky_accuracy[op] < bar[op], (op, leaky_accuracy, bar)
    assert leaky_loss < causal_loss
