"""What decides a prepared corpus's bytes: the recipe, its settings checked as training and prepare's flags name
them, and its inputs checked against each other (no file in both splits, no text field for plain text alone)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, NamedTuple

from gpt.data.formats import format_of
from gpt.data.inputs import input_files
from gpt.data.table_formats import read_files
from gpt.data.tokenizers import tokenizer_label
from gpt.validate import Fraction, PositiveInt, Range, check_fields

# Sizes a shard buffer and a text part must fit in memory (and in numpy's index): a GiB of text, 2**31 tokens.
DocBytes = Annotated[int, Range(1, 1 << 30)]
ShardTokens = Annotated[int, Range(1, 1 << 31)]


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the shards' bytes (the number of processes does not)."""
    inputs: list[str] = field(default_factory=list)
    # When given, these are the validation text (all of it) and `inputs` all train: a fixed held-out file, as
    # nanoGPT's last 10% of Tiny Shakespeare, instead of the hashed val_fraction.
    val_inputs: list[str] = field(default_factory=list)
    tokenizer: str = "char"
    vocab_size: PositiveInt = 4096       # bpe: the size of the trained vocabulary
    compact_vocab: bool | None = None  # gpt2: keep only the ids the corpus uses (None: when under half)
    val_fraction: Fraction = 0.1
    text_field: str = "text"
    doc_bytes: DocBytes = 4096
    shard_tokens: ShardTokens = 1 << 24

    def __post_init__(self) -> None:
        check_fields(self, "data.")  # named as training sets them; gpt prepare's flags are the same words
        tokenizer_label(self.tokenizer)  # refuses a name that is neither a kind nor a tokenizer folder
        if self.val_inputs and self.val_fraction != Recipe.val_fraction:  # it would be ignored without a word
            raise ValueError(f"data.val_fraction={self.val_fraction} splits nothing when the validation text is named "
                             "(data.val_path, or prepare's --val): that text is all of validation and data.path all "
                             "trains; drop one of the two")


class Names(NamedTuple):
    """How messages name the inputs as the user gave them: the format of a path of each setting, and the two."""
    inputs: str
    val_inputs: str
    both: str


TRAINING_NAMES = Names("data.path={}", "data.val_path={}", "data.path and data.val_path")


def split_files(inputs: list[str], val_inputs: list[str],
                names: Names = TRAINING_NAMES) -> tuple[list[Path], list[Path]]:
    """The training and the validation input files, refused when one is in both."""
    train_files, val_files = input_files(inputs, names.inputs), input_files(val_inputs, names.val_inputs)
    if both := {m for p in train_files for m in read_files(p)} & {m for p in val_files for m in read_files(p)}:
        raise ValueError(f"{', '.join(map(str, sorted(both)))} is in both {names.both}: validation text must be "
                         "held out")
    return train_files, val_files


def check_text_field(inputs: list[str], val_inputs: list[str], setting: str, names: Names) -> None:
    """Refuse a text field (`setting`, as the command gave it) where every input is plain text, which has no fields:
    it would be ignored, and the mistake it points at, JSONL saved as *.txt, would train JSON syntax as text."""
    train_files, val_files = split_files(inputs, val_inputs, names)
    if any(format_of(file) != "text" for file in [*train_files, *val_files]):
        return
    paths = [*(names.inputs.format(p) for p in inputs), *(names.val_inputs.format(p) for p in val_inputs)]
    key = setting.split("=")[0].split()[0]  # data.text_field, or prepare's --text-field
    raise ValueError(f"{setting} names a JSONL key or a table's column, and {', '.join(paths)} "
                     f"{'is' if len(paths) == 1 else 'are'} plain text, read whole: drop {key}, or give the file its "
                     "format's suffix (*.jsonl, *.parquet, *.arrow)")
