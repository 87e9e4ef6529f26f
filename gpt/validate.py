"""Every value a user can set, checked against the type (and range) its consumer declares before any work:
a config section against the signature of what it is passed to, a dataclass against its field types. One
line names the one field that is wrong: `model.bias=no must be true or false`."""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import math
import numbers
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NoReturn, Union

from gpt.overrides import quoted


@dataclass(frozen=True)
class Range:
    """Bounds an `Annotated[int | float, Range(...)]` value must lie within; open bounds exclude themselves."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):  # inf passes `> 0`, and is never a setting
            return False
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def describe(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"


PositiveInt = Annotated[int, Range(low=1)]
NonNegativeInt = Annotated[int, Range(low=0)]
PositiveFloat = Annotated[float, Range(low=0, low_open=True)]
NonNegativeFloat = Annotated[float, Range(low=0)]
Fraction = Annotated[float, Range(0, 1, low_open=True, high_open=True)]  # a share strictly between none and all
Probability = Annotated[float, Range(0, 1, high_open=True)]  # dropout: 0 allowed, 1 would drop everything

SEQUENCES = (list, tuple, Iterable, Sequence)  # what a YAML list may be passed as
SCALAR_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (0 processes would otherwise quietly mean every core, a size of
    0 a corpus of nothing)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def first_line(error: BaseException) -> str:
    """What an exception says, in one line: its message's first line (Hydra's, pyarrow's and torch's run to several),
    or its type's name when it says nothing."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def fits(value: Any, hint: Any) -> bool:
    """Whether `value` (plain Python, as OmegaConf gives it) is of type `hint`. Hints a command line cannot
    produce (a Strategy object) match instances only; forms not understood here match anything."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or isinstance(hint, (typing.TypeVar, str, typing.ForwardRef)):
        return True
    if origin is Annotated:
        return fits(value, args[0]) and all(m.holds(value) for m in args[1:] if isinstance(m, Range))
    if origin in (Union, types.UnionType):
        return any(fits(value, a) for a in args)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (type(None), None):
        return value is None
    if origin in SEQUENCES:
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(fits(v, a) for v, a in zip(value, args))
        return not args or all(fits(v, args[0]) for v in value)
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def describe(hint: Any) -> str:
    """What a value of `hint` looks like on a command line: 'a positive integer', 'true or false', ..."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        ranges = [m for m in args[1:] if isinstance(m, Range)]
        if args[0] is int and ranges == [Range(low=1)]:
            return "a positive integer"
        return " ".join([describe(args[0]), *(r.describe() for r in ranges)])
    if origin in (Union, types.UnionType):
        literals = [v for a in args if typing.get_origin(a) is Literal for v in typing.get_args(a)]
        names = [d for a in args if typing.get_origin(a) is not Literal and (d := describe(a))]
        if "a number" in names and "an integer" in names:
            names.remove("an integer")
        if literals:
            names.insert(0, describe(Literal[tuple(dict.fromkeys(literals))]))
        return " or ".join(dict.fromkeys(names))
    if origin is Literal:
        return "one of " + ", ".join(dict.fromkeys(str(a) for a in args))
    if hint in SCALAR_NAMES:
        return SCALAR_NAMES[hint]
    if origin is tuple and len(args) > 1 and args[-1] is not Ellipsis and len(set(args)) == 1:
        return f"a list of {len(args)}, each {describe(args[0])}"  # fits() checks the length too: say it
    if origin in SEQUENCES:
        return f"a list, each {describe(args[0])}" if args else "a list"
    if origin is dict or hint is dict:
        return "a mapping"
    return ""  # objects no command line can write (a Strategy instance): not worth naming


def signature_of(consumer: Callable[..., Any] | type) -> Callable[..., Any]:
    """What a section's values are passed to: a class's __init__, or the callable itself."""
    return consumer.__init__ if isinstance(consumer, type) and not dataclasses.is_dataclass(consumer) else consumer


def declared_types(consumer: Callable[..., Any] | type) -> dict[str, Any]:
    """The parameters `consumer` takes and their type hints (Any where a hint does not resolve)."""
    target = signature_of(consumer)
    if dataclasses.is_dataclass(consumer):
        names = [f.name for f in dataclasses.fields(consumer)]
    else:
        names = [n for n, p in inspect.signature(target).parameters.items()
                 if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except (NameError, TypeError):  # a hint naming a type imported only for type checkers
        hints = {}
    return {name: hints.get(name, Any) for name in names}


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to `name`, or None when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(name: str, choices: Iterable[str], prefix: str = "") -> str:
    """'; did you mean model.heads?' when a choice is close to `name`, else ''."""
    match = closest(name, choices)
    return f"; did you mean {prefix}{match}?" if match else ""


def check_value(name: str, value: Any, hint: Any) -> None:
    if fits(value, hint):
        return
    # numpy's and torch's scalars were told "vocab_size=np.int64(50) must be a positive integer", which it is: it
    # must be Python's own, as model.pt stores the config for torch.load(weights_only=True), which refuses them.
    plain = python_scalar(value)
    if plain is not None and fits(plain, hint):
        raise ValueError(f"{name}={value!r} is a {type(value).__name__}, not a Python number: pass {name}={plain!r}")
    raise ValueError(f"{name}={quoted(value)} must be {describe(hint) or f'of type {hint}'}")


def python_scalar(value: Any) -> Any:
    """The Python number a numpy or torch scalar (or one-element tensor) holds; None for anything else."""
    if isinstance(value, (bool, int, float, str, bytes)) or not callable(getattr(value, "item", None)):
        return None
    try:
        return value.item()
    except (TypeError, ValueError, RuntimeError):  # a tensor of several elements, a dict's item(): not a scalar
        return None


def is_kind(value: object, kind: type[numbers.Number]) -> bool:
    """Whether `value` is an integer (kind numbers.Integral) or a number (numbers.Real): numpy's scalars count, as
    Python's arithmetic and torch take them; bools do not."""
    return isinstance(value, kind) and not isinstance(value, bool)


def check_kind(name: str, value: object, kind: type[numbers.Number], optional: bool = False) -> None:
    """Refuse a value that is_kind does not take, or None where `optional`, naming what it must be."""
    if (value is None and optional) or is_kind(value, kind):
        return
    expected = "an integer" if kind is numbers.Integral else "a number"
    raise ValueError(f"{name}={value!r} must be {expected}{' or None' if optional else ''}")


def repeated(values: Sequence[Any]) -> Any | None:
    """The first value of `values` named a second time, or None."""
    return next((value for i, value in enumerate(values) if value in values[:i]), None)


def check_once(name: str, values: Sequence[Any], each: str) -> None:
    """Refuse a list naming one thing twice: each is a column of the report, and twice made two of one."""
    if (twice := repeated(values)) is not None:
        raise ValueError(f"{name}={list(values)} lists {twice} twice: list each {each} once")


def check_choice(name: str, value: Any, choices: Iterable[str]) -> None:
    """Refuse a value that is none of `choices` (a registry's names), listing them."""
    if value not in choices:
        raise ValueError(f"{name}={quoted(value)} is unknown; choose one of: {', '.join(sorted(choices))}")


def check_section(prefix: str, values: Mapping[str, Any], consumer: Callable[..., Any] | type,
                  not_settable: Iterable[str] = ()) -> None:
    """Each of `values` (one config section) is a parameter of `consumer` and of the type it declares."""
    declared = declared_types(consumer)
    for name in not_settable:
        declared.pop(name, None)
    open_ended = any(p.kind == p.VAR_KEYWORD for p in inspect.signature(signature_of(consumer)).parameters.values())
    for key, value in values.items():
        if key not in declared and open_ended:  # passed on to something else (wandb.init): not checkable here
            continue
        if key not in declared:
            raise ValueError(f"{prefix}.{key} is not a setting of {prefix}{did_you_mean(key, declared, prefix + '.')}"
                             f" (settings: {', '.join(declared)})")
        check_value(f"{prefix}.{key}", value, declared[key])


def check_fields(instance: Any, prefix: str = "") -> None:
    """Every field of a dataclass instance is of its declared type and range (its __post_init__ calls this); a
    message names the field as the user sets it, `prefix` + its name (`data.tasks.recall.pairs=0 ...`)."""
    hints = declared_types(type(instance))
    for field in dataclasses.fields(instance):
        check_value(prefix + field.name, getattr(instance, field.name), hints[field.name])


def check_known_fields(cls: type, values: Mapping[str, Any], section: str,
                       aliases: Mapping[str, str] | None = None) -> None:
    """A saved or hand-written dict names only fields of the dataclass `cls` (its `from_dict` calls this); an unknown
    one is named with the field meant: its entry in `aliases` (another project's name for it), or the closest."""
    known = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        meant = {name: (aliases or {}).get(name) or closest(name, known) for name in unknown}
        hint = ", ".join(f"{field} for {name}" for name, field in meant.items() if field)
        raise ValueError(f"unknown {section} field(s) {unknown}; {f'use {hint}; ' if hint else ''}known fields: "
                         f"{', '.join(sorted(known))}")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad command line is a ValueError, so it takes the one error path (one line, exit 2) instead
    of argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            # Python 3.11's argparse suggests nothing for --top_k, spelt as train.py's keys are (data.num_proc).
            dashed = {"--" + flag[2:].replace("-", "_"): flag for action in self._actions
                      for flag in action.option_strings if "-" in flag[2:]}
            if meant := [dashed[name] for word in message.split() if (name := word.split("=")[0]) in dashed]:
                message = f"{message}: did you mean {', '.join(meant)}?"
        raise ValueError(f"{message} (see {self.prog} --help)")
