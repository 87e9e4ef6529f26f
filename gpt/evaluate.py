"""Grade a model on held-out calculator problems by real greedy generation: prompt with
"<a> <op> <b> equals", decode until the end of line, and compare with the true answer.

    python -m gpt.evaluate --ckpt outputs/<date>/<time>/model.pt [--split test]"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass

import torch

from gpt.calculator import OPERATIONS, Problem, number_to_words, split_problems
from gpt.generation import generate
from gpt.model import GPT
from gpt.tokenizers import Tokenizer


@dataclass
class Graded:
    problem: Problem
    output: str

    @property
    def correct(self) -> bool:
        return self.output == number_to_words(self.problem.answer)


@torch.no_grad()
def grade(model: GPT, tokenizer: Tokenizer, problems: list[Problem], batch_size: int = 512) -> list[Graded]:
    """Greedy-decode every problem's answer. Prompts are batched by token length so no padding is needed."""
    newline = tokenizer.encode("\n")[0]
    max_answer = len(number_to_words(9999).split()) + 1
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    by_length: dict[int, list[tuple[Problem, list[int]]]] = defaultdict(list)
    for problem in problems:
        ids = [newline, *tokenizer.encode(problem.prompt)]
        by_length[len(ids)].append((problem, ids))
    graded = []
    for group in by_length.values():
        for i in range(0, len(group), batch_size):
            chunk = group[i:i + batch_size]
            idx = torch.tensor([ids for _, ids in chunk], device=device)
            out = generate(model, idx, max_answer, temperature=0.0, stop_token=newline)[:, idx.shape[1]:]
            for (problem, _), row in zip(chunk, out.tolist()):
                answer = row[:row.index(newline)] if newline in row else row
                graded.append(Graded(problem, tokenizer.decode(answer)))
    model.train(was_training)
    return graded


def accuracy_by_operation(graded: list[Graded]) -> dict[str, float]:
    """Exact-match accuracy per operation (for the operations present) and over all problems."""
    result = {}
    for op in OPERATIONS:
        mine = [g for g in graded if g.problem.op == op]
        if mine:
            result[op] = sum(g.correct for g in mine) / len(mine)
    result["all"] = sum(g.correct for g in graded) / max(len(graded), 1)
    return result


def main(argv: list[str] | None = None) -> int:
    from gpt.checkpoint import CheckpointError, load_checkpoint, newest_checkpoint

    parser = argparse.ArgumentParser(description="Exact-match accuracy on held-out calculator problems.")
    parser.add_argument("--ckpt", help="model.pt to grade (default: the newest under outputs/)")
    parser.add_argument("--split", choices=["val", "test"], default="test")
    parser.add_argument("--seed", type=int, help="data.seed the model was trained with (default: from model.pt)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        path = args.ckpt or newest_checkpoint()
        model, tokenizer, meta = load_checkpoint(path, device=args.device, with_meta=True)
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    data = meta  # model.pt records the DataModule's meta: seed and split fractions
    if args.seed is None and "seed" not in data:
        print("error: model.pt does not say which data.seed it was trained with; pass --seed", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else data["seed"]
    problems = split_problems(seed, data.get("val_fraction", 0.1), data.get("test_fraction", 0.1))[args.split]
    problems = [p for p in problems if p.op in data.get("operations", OPERATIONS)]
    accuracy = accuracy_by_operation(grade(model, tokenizer, problems))
    print(f"{path}: {len(problems)} {args.split} problems, data.seed={seed}")
    for op, value in accuracy.items():
        print(f"  {op:>10}: {100 * value:6.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
