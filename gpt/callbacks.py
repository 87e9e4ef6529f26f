"""Lightning callbacks: held-out exact-match accuracy by generation at each validation."""
from __future__ import annotations

import lightning as L

from gpt.calculator import Problem
from gpt.evaluate import accuracy_by_operation, grade
from gpt.tokenizers import Tokenizer


class HeldOutAccuracy(L.Callback):
    """Greedy-decode a fixed sample of held-out problems, log accuracy per operation, show a few answers."""

    def __init__(self, problems: list[Problem], tokenizer: Tokenizer, show: int = 3) -> None:
        self.problems, self.tokenizer, self.show = problems, tokenizer, show

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        graded = grade(pl_module.model, self.tokenizer, self.problems)
        accuracy = accuracy_by_operation(graded)
        pl_module.log_dict({f"val/acc_{op.replace(' ', '_')}": value for op, value in accuracy.items()})
        summary = "  ".join(f"{op} {100 * value:.1f}%" for op, value in accuracy.items())
        pl_module.print(f"\nstep {trainer.global_step}: held-out exact match: {summary}")
        for g in graded[:self.show]:
            mark = "ok" if g.correct else "WRONG"
            pl_module.print(f"  {g.problem.prompt} -> {g.output}  [{mark}]")
