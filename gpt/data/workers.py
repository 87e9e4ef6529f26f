"""The work of preparation's processes: a unit's texts for the tokenizer to learn from, and a unit encoded and split
into training and validation ids; the corpus as work units mapped over by them (Source)."""
from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import numpy as np
from tqdm import tqdm

from gpt.data.formats import FORMATS
from gpt.data.pool import ordered_map
from gpt.data.recipe import Recipe
from gpt.data.shards import token_dtype
from gpt.data.tokenizers.base import Tokenizer
from gpt.data.work_units import Part, Unit

T = TypeVar("T")
VALIDATION_RULE = ("a part (a document, or a ~doc_bytes line-aligned piece of a longer plain-text document) is "
                   "validation when the first 8 bytes of blake2b(its UTF-8), little-endian, are below "
                   "val_fraction * 2**64")
VALIDATION_INPUTS_RULE = "every part of val_inputs is validation and every part of inputs is training"


@dataclass(frozen=True)
class Work:
    """What a unit's work needs, handed to each worker process once: the recipe, which input files are validation
    text, and the tokenizer once it is learned."""
    recipe: Recipe
    val_files: frozenset[str] = frozenset()
    tokenizer: Tokenizer | None = None


def _parts(work: Work, unit: Unit) -> Iterator[Part]:
    return FORMATS[unit.format].parts(unit, work.recipe.doc_bytes, work.recipe.text_field)


def _over_texts(fn: Callable[[Iterator[str]], T], work: Work, unit: Unit) -> T:
    """fn over a unit's texts (what a tokenizer learns from)."""
    return fn(part.text for part in _parts(work, unit))


def encode(work: Work, unit: Unit) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """(train ids, val ids, documents, which ids occur) of one unit; each part goes to the split its content hashes
    to. The parts are encoded in one call and split with array operations: per-part Python work would cost more
    than the BPE itself."""
    tokenizer, recipe = work.tokenizer, work.recipe
    texts, ends = [], []
    for part in _parts(work, unit):
        texts.append(part.text)
        ends.append(part.ends_document)
    ids, lengths = tokenizer.encode_many(texts)
    ends = np.array(ends, bool)
    if tokenizer.eot_id is not None:  # a pretrained folder's tokenizer may have none
        ids = np.insert(ids, np.cumsum(lengths)[ends], tokenizer.eot_id)
        lengths = lengths + ends
    if recipe.val_inputs:
        val = np.full(len(ids), unit.path in work.val_files)  # (tokens,) whether each id is validation
    else:
        threshold = recipe.val_fraction * 2**64
        held = [int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") < threshold
                for text in texts]
        # bool even for a unit with no text (only empty documents): np.repeat of [] would give floats.
        val = np.repeat(np.array(held, bool), lengths)  # (tokens,) whether each id's part is validation
    occurs = np.zeros(tokenizer.vocab_size, bool)
    occurs[ids] = True
    dtype = token_dtype(tokenizer.vocab_size)
    return ids[~val].astype(dtype), ids[val].astype(dtype), int(ends.sum()), occurs


class Source:
    """The corpus as work units, mapped over by `num_proc` forked processes in unit order (so the result
    never depends on how many there are), with a progress bar of bytes, documents, tokens, MB/s and ETA."""

    def __init__(self, units: list[Unit], work: Work, num_proc: int, progress: bool | None) -> None:
        self.units, self.work, self.num_proc, self.progress = units, work, num_proc, progress

    def run(self, fn: Callable[[Work, Unit], T], desc: str,
            tally: Callable[[T], dict[str, int]] | None = None) -> Iterator[T]:
        """fn of each unit, in unit order; the `tally` of each result is summed into the progress bar."""
        total, totals = sum(unit.nbytes for unit in self.units), {}
        with ordered_map(fn, self.work, self.num_proc, len(self.units)) as mapper, \
                tqdm(total=total, unit="B", unit_scale=True, desc=desc, file=sys.stderr,
                     disable=None if self.progress is None else not self.progress) as bar:
            for unit, result in zip(self.units, mapper(self.units)):
                yield result
                for key, value in (tally(result) if tally else {}).items():
                    totals[key] = totals.get(key, 0) + value
                bar.set_postfix(totals, refresh=False)
                bar.update(unit.nbytes)

    def map(self, fn: Callable[[Iterator[str]], T]) -> Iterator[T]:
        yield from self.run(partial(_over_texts, fn), "learning the vocabulary")

    def texts(self, max_bytes: int) -> Iterator[str]:
        total = min(max_bytes, sum(unit.nbytes for unit in self.units))
        with tqdm(total=total, unit="B", unit_scale=True, desc="reading for the tokenizer", file=sys.stderr,
                  disable=None if self.progress is None else not self.progress) as bar:
            read = 0  # counted here: a disabled bar (no terminal: a log, CI) counts nothing, and all was read
            for unit in self.units:
                for part in _parts(self.work, unit):
                    yield part.text
                    size = len(part.text.encode())  # bytes, as max_bytes: CJK text is 3 of them a character
                    bar.update(size)
                    read += size
                    if read >= max_bytes:
                        return
