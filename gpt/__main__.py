"""tinygpt's front door: `python -m gpt <verb> ...`, every command beside train.py and generate.py.

Each verb's module gives `add_arguments(parser)` and `run(args)`, and is imported only when its verb runs (preparing
a corpus needs no torch). A mistake a user can make is one line on stderr and exit status 2, here for every verb."""
from __future__ import annotations

import difflib
import importlib
import sys
from types import ModuleType

from gpt.pipe import exit_with
from gpt.validate import OneLineParser, first_line

# verb -> (module, what it does)
VERBS: dict[str, tuple[str, str]] = {
    "prepare": ("gpt.data.prepare_command",
                "tokenize a corpus (text, JSONL, Parquet, Arrow, folders) into token shards"),
    "evaluate": ("gpt.evaluation.evaluate", "grade a model.pt on held-out examples, or a text model's loss and bpb"),
    "export": ("gpt.hf.export", "write a model.pt as a Hugging Face folder (config.json + model.safetensors)"),
    "report": ("gpt.sweeps.report_command", "write a sweep's report.md and its figures again"),
    "which-split": ("gpt.evaluation.which_split",
                    "say whether a calculator problem is in the train, val or test split"),
    "cost": ("gpt.cost.command", "measure each attention variant's prefill, decode, memory and cache at depth"),
}


def verb_module(verb: str) -> ModuleType:
    if verb not in VERBS:
        close = difflib.get_close_matches(verb, VERBS, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"{verb!r} is not a verb of python -m gpt{hint} (verbs: {', '.join(VERBS)})")
    return importlib.import_module(VERBS[verb][0])


def parser_for(verb: str) -> OneLineParser:
    """The argument parser of one verb, as `python -m gpt <verb>` reads its arguments."""
    module = verb_module(verb)
    parser = OneLineParser(prog=f"python -m gpt {verb}", description=(module.run.__doc__ or "").split("\n")[0])
    module.add_arguments(parser)
    return parser


def overview() -> str:
    width = max(map(len, VERBS))
    lines = [f"  {verb:<{width}}  {what}" for verb, (_, what) in VERBS.items()]
    return "\n".join(["usage: python -m gpt <verb> [arguments]   (python -m gpt <verb> --help for its arguments)",
                      "", "verbs:", *lines, "", "Training and generation: python train.py, python generate.py."])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(overview())
        return 0
    try:
        args = parser_for(argv[0]).parse_args(argv[1:])
        verb_module(argv[0]).run(args)
    except ValueError as err:  # user mistakes, CheckpointError included: one line, no traceback
        print(f"error: {first_line(err)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    exit_with(main)
