"""The readers of UTF-8 text and JSON Lines: byte ranges of whole parts (text_parts cuts a plain-text file's), read
back as documents."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from gpt.data.text_checks import BOM, SURROGATE, eight_bit_source, not_binary, not_utf16, utf8
from gpt.data.text_parts import MARKER_LINE, REACH, after_marker, cuts, part_start_past
from gpt.data.work_units import UNIT_BYTES, Part, Unit
from gpt.overrides import path_argument

JSON_TYPES = {bool: "true or false", int: "a number", float: "a number", type(None): "null", list: "an array",
              dict: "an object"}  # what a JSON value that is not a string is, as JSON names it


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
                yield Part(utf8(buf[start:end], unit.path, unit.start + start).replace("\r\n", "\n"), ends)


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
                not_utf16(raw, unit.path)
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
                not_binary(raw, unit.path, line_start)
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
