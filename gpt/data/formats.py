"""The input formats: which reader reads a path (text_formats, table_formats), by its suffix or as a saved dataset's
folder, and an input's fingerprint."""
from __future__ import annotations

from pathlib import Path

from gpt.data.table_formats import ArrowFormat, DatasetFormat, ParquetFormat
from gpt.data.text_formats import JsonlFormat, TextFormat

FORMATS = {"text": TextFormat, "jsonl": JsonlFormat, "parquet": ParquetFormat, "dataset": DatasetFormat,
           "arrow": ArrowFormat}
# What a folder gives. *.feather is the name pyarrow's and pandas' write_feather give Arrow's file format.
SUFFIXES = {".txt": "text", ".jsonl": "jsonl", ".parquet": "parquet", ".arrow": "arrow", ".feather": "arrow"}
# A file named outright may also be *.json: JSON Lines under that name is common, and read as text its syntax would
# be trained on (a single JSON document fails at its first line, naming it).
FILE_SUFFIXES = {**SUFFIXES, ".json": "jsonl"}


def format_of(path: Path) -> str:
    """A folder saved by `datasets` is a dataset; a file is read by its suffix, whatever its case, and as text if it
    has another."""
    if path.is_dir():
        return "dataset"
    return FILE_SUFFIXES.get(path.suffix.lower(), "text")


def fingerprint(path: Path) -> list[list[str | int]]:
    """Path, size and modification time of an input (of every file in a dataset folder): cheap at any size."""
    members = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in members]
