"""train.py's flags are Hydra's own (--help, --cfg, -m, ...), read here as Hydra's parser will read them: a flag it
does not know, a bad value of one, or an override it would not read (one after a flag's value) is one line naming
the fix, where Hydra prints its usage, seven lines, before its own."""
from __future__ import annotations

import ast
from pathlib import Path

from hydra._internal.utils import get_args_parser

from gpt.validate import OneLineParser, closest

PROG = "python train.py"


def flags_of(script: Path) -> set[str]:
    """The --flags `script` gives its argparse parser, read from its source: importing generate.py imports torch,
    seconds spent before a line that needs none of it."""
    if not script.is_file():
        return set()
    calls = [node for node in ast.walk(ast.parse(script.read_text())) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"]
    return {arg.value for call in calls for arg in call.args
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")}


def check_flags(argv: list[str], generate: Path) -> None:
    """Raise a one-line ValueError for a command line Hydra's parser would refuse; `generate` is generate.py, whose
    flags (--prompt) are told to be its own."""
    hydra = get_args_parser()
    parser = OneLineParser(prog=PROG, parents=[hydra], add_help=False)  # Hydra's parser has its own --help
    # --version prints Hydra's version and exits here, as Hydra would.
    args, unknown = parser.parse_known_args(argv)
    if not unknown:
        return
    first = unknown[0]
    name = first.split("=", 1)[0]
    if not first.startswith("-"):  # argparse takes one run of overrides: the first run, before a flag's value
        flags = [a for a in argv if a not in args.overrides and a not in unknown]
        fix = " ".join([*args.overrides, *[a for a in unknown if not a.startswith("-")], *flags])
        raise ValueError(f"{first} comes after a flag, where Hydra reads no override: put every key=value before "
                         f"the flags ({PROG} {fix})")
    if name in flags_of(generate):
        raise ValueError(f"{name} is a flag of generate.py, not of train.py: python generate.py {name} ... runs a "
                         f"trained model; train.py takes overrides key=value ({PROG} --help lists them)")
    if "=" in first:  # --model.heads=4, --seed=3: an override written as a flag
        raise ValueError(f"{first} is not a flag of train.py: write the override without dashes, "
                         f"{first.lstrip('-')}")
    # Compared without their dashes, and long with long: --lr was "did you mean -r?"
    alike = {flag.lstrip("-"): flag for action in hydra._actions for flag in action.option_strings
             if flag.startswith("--") == name.startswith("--")}
    match = closest(name.lstrip("-"), alike)
    raise ValueError(f"{name} is not a flag of train.py, which takes overrides key=value and Hydra's flags "
                     f"({PROG} --help lists both){f'; did you mean {alike[match]}?' if match else ''}")
