"""Streaming readers, one per input format. Each cuts its files into work units of whole parts (so processes
can share a corpus, and memory stays bounded by a unit) and reads a unit back as parts: a whole document, or
a line-aligned piece of about `doc_bytes` of a longer plain-text document. A part is what the split assigns."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gpt.data.text_parts import MARKER_LINE, REACH, after_marker, cuts, part_start_past
from gpt.overrides import path_argument
from gpt.validate import first_line

UNIT_BYTES = 4 << 20  # one task of a worker: big enough to amortize dispatch, small enough to bound memory
BOM = b"\xef\xbb\xbf"  # what Windows editors put before UTF-8 text: a mark, not a character of the first document
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # what a UTF-16 file starts with (little- or big-endian): no UTF-8 text does
JSON_TYPES = {bool: "true or false", int: "a number", float: "a number", type(None): "null", list: "an array",
              dict: "an object"}  # what a JSON value that is not a string is, as JSON names it
SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: JSON can escape one alone, UTF-8 cannot hold it
# The ASCII control characters but whitespace and NUL: text in an 8-bit encoding (Latin-1, Windows-1252) holds none,
# nor does UTF-16 but the NUL beside each ASCII character; random or compressed bytes hold about one in ten. Past
# BINARY_SHARE of them bytes are no text, and converting them as text would make garbage to train on.
CONTROL = bytes([*range(0x01, 0x09), *range(0x0e, 0x20), 0x7f])
BINARY_SHARE = 0.05
WINDOWS_1252 = re.compile(rb"[\x80-\x9f]")  # Windows-1252's printable bytes where latin1 has control characters
ARROW_MAGIC = b"ARROW1"  # what Arrow's file format (Feather v2) starts with; its stream format starts otherwise
FEATHER_V1_MAGIC = b"FEA1"  # what Feather v1 (write_feather's version=1, pandas' before pyarrow 0.17) starts with
END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # what an Arrow stream's writer ends it with when it closes


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


def _not_utf16(start: bytes, path: str) -> None:
    """Refuse a file whose `start` is a UTF-16 byte order mark."""
    if start.startswith(UTF16_BOMS):
        raise ValueError(f"{path} is UTF-16, not UTF-8: convert it (iconv -f utf-16 -t utf-8)")


def _not_binary(raw: bytes, path: str, offset: int) -> None:
    """Refuse `raw`, which is not UTF-8, when more of its bytes are control characters than text in any encoding
    holds."""
    control = len(raw) - len(raw.translate(None, CONTROL))
    if control > BINARY_SHARE * len(raw):
        raise ValueError(f"{path} is not text (binary?): {control / len(raw):.0%} of its bytes from byte offset "
                         f"{offset} are control characters, which text in no encoding holds so many of: give a text "
                         "file")


def _utf8(raw: bytes, path: str, offset: int) -> str:
    # UTF-16 (Windows' "Unicode", PowerShell 5's > redirection) is named as such: converted from latin1, as bytes that
    # are not UTF-8 are told to be, it would keep a NUL byte beside each character; without a byte order mark its ASCII
    # is valid UTF-8 and those NULs were trained on. A NUL byte is no text.
    if offset == 0:
        _not_utf16(raw, path)
    if (nul := raw.find(b"\x00")) != -1:
        _not_binary(raw, path, offset)
        raise ValueError(f"{path} holds a NUL byte at byte offset {offset + nul}, which text does not: it is UTF-16 "
                         "(convert it: iconv -f utf-16le -t utf-8) or binary")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        _not_binary(raw, path, offset)
        raise ValueError(f"{path} is not UTF-8: byte 0x{raw[err.start]:02x} at byte offset {offset + err.start} "
                         f"(convert it, e.g. iconv -f {eight_bit_source(raw)} -t utf-8)") from None


def eight_bit_source(raw: bytes) -> str:
    """The 8-bit encoding `raw` is likely in: Windows-1252 where it holds 0x80-0x9f, its curly quotes, dashes and euro
    sign (converted from latin1 they became invisible control characters, trained as text), else latin1."""
    try:
        raw.decode("cp1252")
    except UnicodeDecodeError:  # five bytes of 0x80-0x9f are in no Windows-1252 text
        return "latin1"
    return "cp1252" if WINDOWS_1252.search(raw) else "latin1"


class TextFormat:
    """UTF-8 text; `<|endoftext|>` (and the line ending after it) separates documents, a file without it is one.
    Windows' \\r\\n line endings read as \\n (as Python's text mode reads them), and a leading byte order mark as
    nothing (as the utf-8-sig codec does)."""

    @staticmethod
    def units(path: Path, doc_bytes: int, text_field: str) -> list[Unit]:
        """Byte ranges of about UNIT_BYTES that start and end where parts do. Every marker ends a part, so a range
        ends after the first marker past UNIT_BYTES (no need to read up to it); one with no marker near is cut
        by scanning its parts."""
        units, size = [], path.stat().st_size
        with open(path, "rb") as f:
            start = len(BOM) if f.read(len(BOM)) == BOM else 0
            while start < size:
                stop = after_marker(f, start + UNIT_BYTES, size, UNIT_BYTES) \
                    or part_start_past(f, start, doc_bytes, UNIT_BYTES)
                units.append(Unit("text", str(path), start, stop, stop - start))
                start = stop
        return units

    @staticmethod
    def parts(unit: Unit, doc_bytes: int, text_field: str) -> Iterator[Part]:
        reach = unit.stop - unit.start + REACH * doc_bytes + MARKER_LINE  # the look-ahead the scan had
        with open(unit.path, "rb") as f:
            f.seek(unit.start)
            buf = f.read(reach)
            final = not f.read(1)
        for start, end, _, ends in cuts(buf, doc_bytes, final):
            if start >= unit.stop - unit.start:
                break
            if end > start:
                yield Part(_utf8(buf[start:end], unit.path, unit.start + start).replace("\r\n", "\n"), ends)


class JsonlFormat:
    """One JSON object per line; its `text_field` is one document. A leading byte order mark reads as nothing, as
    in a text file (json.loads drops one only where a line of JSON follows it)."""

    @staticmethod
    def units(path: Path, doc_bytes: int, text_field: str) -> list[Unit]:
        """Byte ranges of whole lines, each knowing its first line's number for error messages."""
        units, line = [], 1
        with open(path, "rb") as f:
            start = len(BOM) if f.read(len(BOM)) == BOM else 0
            while True:
                f.seek(start + UNIT_BYTES)
                tail = f.readline()  # finish the line the cut fell in
                stop = f.tell() if tail else f.seek(0, 2)
                if stop <= start:
                    break
                units.append(Unit("jsonl", str(path), start, stop, stop - start, line))
                f.seek(start)
                line += f.read(stop - start).count(b"\n")
                start = stop
        return units

    @staticmethod
    def parts(unit: Unit, doc_bytes: int, text_field: str) -> Iterator[Part]:
        with open(unit.path, "rb") as f:
            f.seek(unit.start)
            lines = f.read(unit.stop - unit.start).split(b"\n")
        for number, raw in enumerate(lines, unit.first_line):
            if number == 1:  # json.loads reads a line of UTF-16 too, and fails at the next
                _not_utf16(raw, unit.path)
            if not raw.strip():
                continue
            # A JSON document (an array of records, an object over several lines) fails at its first line, whose own
            # fix would be wrong: the rest is no JSON Lines either.
            opening = raw.strip()[:1] if number == 1 else b""
            if opening == b"[" or opening == raw.strip() == b"{":
                what, query = ("a JSON array", "'.[]'") if opening == b"[" else ("JSON over several lines", ".")
                raise ValueError(f"{unit.path} is {what}, not JSON Lines (an object per line): write each record on a "
                                 f"line of its own, e.g. jq -c {query} {path_argument(unit.path)} > <new file>.jsonl")
            try:
                record = json.loads(raw)
            except UnicodeDecodeError as err:  # named as in a text file: iconv without -f reads the locale's UTF-8
                line_start = unit.start + sum(len(line) + 1 for line in lines[:number - unit.first_line])
                _not_binary(raw, unit.path, line_start)
                raise ValueError(f"{unit.path}:{number} is not UTF-8: byte 0x{raw[err.start]:02x} at byte offset "
                                 f"{line_start + err.start} (convert it, e.g. iconv -f {eight_bit_source(raw)} -t "
                                 "utf-8)") from None
            except json.JSONDecodeError as err:
                raise ValueError(f"{unit.path}:{number} is not JSON ({err.msg}): fix or delete that line") from None
            # Valid JSON that json refuses, in words that name no line: an integer of over 4,300 digits (a ValueError),
            # nesting deeper than the recursion limit.
            except (ValueError, RecursionError) as err:
                raise ValueError(f"{unit.path}:{number} is JSON that Python cannot read ({err}): fix or delete that "
                                 "line") from None
            if not isinstance(record, dict) or text_field not in record:
                raise ValueError(f"{unit.path}:{number} has no text field {text_field!r}: set data.text_field="
                                 "<the key that holds the text>")
            text = record[text_field]
            if not isinstance(text, str):
                raise ValueError(f"{unit.path}:{number} field {text_field!r} is {JSON_TYPES[type(text)]}, not a "
                                 "string: make it a string, or set data.text_field=<the key that holds the text>")
            # Only a \u escape gives a lone surrogate (json.loads refuses one in UTF-8), which no tokenizer
            # and no hash can encode.
            if b"\\u" in raw and (half := SURROGATE.search(text)):
                raise ValueError(f"{unit.path}:{number} field {text_field!r} holds \\u{ord(half[0]):04x}, half of a "
                                 "UTF-16 surrogate pair without its other half (not a character): fix or delete that "
                                 "line")
            if text:
                yield Part(text, True)


def _text_column(path: Path, schema: Any, text_field: str) -> None:
    """Refuse a table (its pyarrow.Schema) whose `text_field` column is missing or holds no strings."""
    import pyarrow as pa

    if text_field not in schema.names:
        raise ValueError(f"{path} has no column {text_field!r} (it has {', '.join(schema.names)}): set "
                         "data.text_field=<the column that holds the text>")
    kind = schema.field(text_field).type
    values = kind.value_type if pa.types.is_dictionary(kind) else kind  # a dictionary-encoded column's values
    if str(values) not in ("string", "large_string", "string_view"):
        raise ValueError(f"{path} column {text_field!r} holds {kind} values, not strings: set data.text_field=<the "
                         "column that holds the text>")


def _documents(texts: list[str | None], path: str, first_row: int, text_field: str) -> Iterator[Part]:
    """Each row's text (those of the rows from `first_row` on) as a document. An empty text adds nothing, as a
    JSONL "" does; a null is refused, as a JSONL null is: no text, rather than an empty one."""
    if None in texts:
        raise ValueError(f"{path} row {first_row + texts.index(None)} (counting from 0) has a null {text_field!r}, "
                         f"not a string: drop or fill the rows whose {text_field!r} is null, or set "
                         "data.text_field=<the column that holds the text>")
    for text in texts:
        if text:
            yield Part(text, True)


class ParquetFormat:
    """A Parquet file; each row's `text_field` is one document, read a row group at a time with pyarrow."""

    @staticmethod
    def units(path: Path, doc_bytes: int, text_field: str) -> list[Unit]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(path)
        # pyarrow's message does not name the file; a damaged footer is an OSError ("Couldn't deserialize thrift")
        except (pa.ArrowInvalid, OSError) as err:
            raise ValueError(f"{path} is not a Parquet file ({first_line(err)}): write it again, or rename it if it "
                             "holds text (*.txt) or JSONL (*.jsonl)") from None
        _text_column(path, parquet.schema_arrow, text_field)
        meta = parquet.metadata
        return [Unit("parquet", str(path), group, group + 1, meta.row_group(group).total_byte_size)
                for group in range(meta.num_row_groups)]

    @staticmethod
    def parts(unit: Unit, doc_bytes: int, text_field: str) -> Iterator[Part]:
        for first_row, texts in ParquetFormat.batches(unit, text_field):
            yield from _documents(texts, unit.path, first_row, text_field)

    @staticmethod
    def batches(unit: Unit, text_field: str) -> Iterator[tuple[int, list[str | None]]]:
        """(the file's row number of its first row, its texts) of each batch of the unit's row group."""
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(unit.path)
            row = sum(parquet.metadata.row_group(group).num_rows for group in range(unit.start))
            for batch in parquet.iter_batches(batch_size=1024, row_groups=[unit.start], columns=[text_field]):
                yield row, batch.column(0).to_pylist()
                row += batch.num_rows
        # Parquet pages carry no checksum: a damaged one is found by decoding it (OSError: "Corrupt snappy compressed
        # data"; ValueError: bytes that are not UTF-8, an index past its dictionary), in pyarrow's words alone.
        except (OSError, ValueError) as err:
            raise ValueError(f"{unit.path} is damaged in row group {unit.start} ({first_line(err)}): write it again, "
                             "or copy it again") from None


class TableFormat:
    """Rows of an Arrow table; each row's `text_field` is one document, read a slice of rows at a time."""

    format = ""

    @staticmethod
    def table(path: Path | str, text_field: str) -> Any:  # a pyarrow.Table, memory-mapped
        raise NotImplementedError

    @classmethod
    def units(cls, path: Path, doc_bytes: int, text_field: str) -> list[Unit]:
        import pyarrow as pa

        table = cls.table(path, text_field)
        for file in read_files(path):
            _not_cut_short(file)
        try:  # once, here: pyarrow trusts a file's offsets, and a damaged one read as text crashed the process
            table.column(text_field).validate(full=True)
        except pa.ArrowInvalid as err:
            raise ValueError(f"{path} is damaged ({first_line(err)}): write it again, or copy it again") from None
        rows, nbytes = table.num_rows, table.nbytes
        step = max(1, rows * UNIT_BYTES // max(nbytes, 1))
        return [Unit(cls.format, str(path), i, min(i + step, rows), nbytes * (min(i + step, rows) - i) // rows)
                for i in range(0, rows, step)]

    @classmethod
    def parts(cls, unit: Unit, doc_bytes: int, text_field: str) -> Iterator[Part]:
        column = cls.table(unit.path, text_field).slice(unit.start, unit.stop - unit.start).column(text_field)
        yield from _documents(column.to_pylist(), unit.path, unit.start, text_field)


def _starts_with(path: Path | str, magic: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(magic)) == magic


def _not_cut_short(path: Path) -> None:
    """Refuse an Arrow stream without the end-of-stream marker its writer closes it with: cut between two record
    batches (a copy or download stopped there), it reads as a whole stream of fewer rows. A file of Arrow's file
    format, or of Feather v1, opens only with its footer, which is its end."""
    if _starts_with(path, ARROW_MAGIC) or _starts_with(path, FEATHER_V1_MAGIC):
        return
    with open(path, "rb") as f:
        f.seek(max(f.seek(0, 2) - len(END_OF_STREAM), 0))
        if f.read() != END_OF_STREAM:
            raise ValueError(f"{path} is cut short (an Arrow stream without its end-of-stream marker): copy it again, "
                             "or write it again")


class DatasetFormat(TableFormat):
    """A Hugging Face dataset saved with `save_to_disk` (the optional `datasets` package reads it)."""

    format = "dataset"

    @staticmethod
    def table(path: Path | str, text_field: str) -> Any:
        try:
            import datasets
        except ImportError:
            raise ValueError(f"{path} is a Hugging Face dataset: pip install datasets to read it") from None
        dataset = datasets.load_from_disk(str(path))
        _text_column(Path(path), dataset.data.table.schema, text_field)
        return dataset.data.table


def _read_arrow(path: str) -> Any:  # a pyarrow.Table, memory-mapped
    import pyarrow as pa
    import pyarrow.feather as feather

    if _starts_with(path, FEATHER_V1_MAGIC):  # no ipc reader reads it; pyarrow's feather module does
        return feather.read_table(path, memory_map=True)
    open_format = pa.ipc.open_file if _starts_with(path, ARROW_MAGIC) else pa.ipc.open_stream
    return open_format(pa.memory_map(path)).read_all()


class ArrowFormat(TableFormat):
    """An Arrow stream file, as the `datasets` cache keeps a loaded dataset (~/.cache/huggingface/datasets), a file
    of Arrow's file format (Feather v2), as pyarrow's ipc.new_file and polars' write_ipc write one, or a Feather v1
    file."""

    format = "arrow"

    @staticmethod
    def table(path: Path | str, text_field: str) -> Any:
        import pyarrow as pa

        try:
            table = _read_arrow(str(path))
        except (pa.ArrowInvalid, OSError) as err:
            raise ValueError(f"{path} is not an Arrow file ({first_line(err)}): copy it again, or write it again (or "
                             "rename it if it holds text: *.txt)") from None
        _text_column(Path(path), table.schema, text_field)
        return table


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


def read_files(path: Path) -> list[Path]:
    """The files, resolved, that an input of input_files reads: a saved dataset's *.arrow files (which a folder above
    it gives too), or the file itself."""
    return sorted(p.resolve() for p in path.glob("*.arrow")) if path.is_dir() else [path.resolve()]


def fingerprint(path: Path) -> list[list[str | int]]:
    """Path, size and modification time of an input (of every file in a dataset folder): cheap at any size."""
    members = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in members]
