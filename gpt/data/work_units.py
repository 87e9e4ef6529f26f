"""What every input format's reader gives: it cuts its files into work units of whole parts (so processes can share
a corpus, and memory stays bounded by a unit) and reads a unit back as parts: a whole document, or a line-aligned piece
of about `doc_bytes` of a longer plain-text document. A part is what the split assigns."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

UNIT_BYTES = 4 << 20  # one task of a worker: big enough to amortize dispatch, small enough to bound memory


@dataclass(frozen=True)
class Unit:
    """A slice of one input: a byte range (text, JSONL), a row group (Parquet) or a row range (a dataset)."""
    format: str
    path: str
    start: int
    stop: int
    nbytes: int
    first_line: int = 1


class Part(NamedTuple):  # a tuple: millions are made
    text: str
    ends_document: bool
