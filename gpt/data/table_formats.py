"""The readers of tables, with pyarrow: a Parquet file a row group at a time; an Arrow or Feather file and a
Hugging Face dataset saved with `save_to_disk` a slice of rows at a time, with the magic bytes that tell their kinds
apart and the files a dataset's folder reads. Each row's `text_field` is one document."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpt.data.work_units import UNIT_BYTES, Part, Unit
from gpt.validate import first_line

ARROW_MAGIC = b"ARROW1"  # what Arrow's file format (Feather v2) starts with; its stream format starts otherwise
FEATHER_V1_MAGIC = b"FEA1"  # what Feather v1 (write_feather's version=1, pandas' before pyarrow 0.17) starts with
END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # what an Arrow stream's writer ends it with when it closes


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


def read_files(path: Path) -> list[Path]:
    """The files, resolved, that an input of input_files reads: a saved dataset's *.arrow files (which a folder above
    it gives too), or the file itself."""
    return sorted(p.resolve() for p in path.glob("*.arrow")) if path.is_dir() else [path.resolve()]
