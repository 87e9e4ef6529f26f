"""How a plain-text file is cut into parts: a document ends at each `<|endoftext|>` marker, and a longer one is cut
into line-aligned pieces of about doc_bytes, measured as the text reads (each \\r\\n one byte); and where a work unit
of about `unit_bytes` (the size gpt.data.work_units gives every format's units) may end: where a part starts."""
from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

MARKER = b"<|endoftext|>"  # separates documents in a text file (TinyStories' convention)
MARKER_LINE = len(MARKER) + 2  # the bytes a marker and the line ending after it take
REACH = 4  # the bytes a part may span, in doc_bytes: 2 * doc_bytes of text, twice that where every line is a \r\n


def _past_line_end(buf: bytes, at: int) -> int:
    """`at`, or past the line ending (\\n or Windows' \\r\\n) that starts there: the one a marker's line ends with."""
    return at + 2 if buf[at:at + 2] == b"\r\n" else at + (buf[at:at + 1] == b"\n")


def _ahead(buf: bytes, pos: int, size: int) -> int:
    """Where `size` bytes of text from `pos` end, each \\r\\n read as the \\n it stands for: a part measured so is
    cut where the same text with \\n line endings is (a \\r\\n after them is not among them)."""
    end, pairs, counted = pos + size, 0, pos
    if buf.find(b"\r", pos, end) == -1:  # a byte search: most text has no \r to count
        return end
    while True:  # each \r\n in [pos, end) moves the end a byte on; from a byte back, a pair the last end split counts
        pairs += buf.count(b"\r\n", max(counted - 1, pos), end)
        if (further := pos + size + pairs) == end:
            break
        counted, end = end, further
    return end + (buf[end - 1:end + 1] == b"\r\n")  # a \r\n's \r ends the text: past its \n, which it reads as


def _cut(buf: bytes, pos: int, doc_bytes: int, final: bool) -> tuple[int, int, bool] | None:
    """(end, next start, ends_document) of the text part starting at `pos`, or None when the rest of `buf` is
    too short to decide (unless `final`: buf ends where the file does). A part ends at a marker, or at the first
    newline once it holds doc_bytes, or (one endless line) at a character's first byte at 2 * doc_bytes, its bytes
    counted as the text reads (a \\r\\n as one)."""
    cap = _ahead(buf, pos, 2 * doc_bytes)
    if not final and len(buf) < cap + MARKER_LINE:
        return None
    marker = buf.find(MARKER, pos, cap + len(MARKER))
    newline = buf.find(b"\n", _ahead(buf, pos, doc_bytes - 1), cap)
    if marker != -1 and (newline == -1 or marker <= newline + 1):  # a marker right after the cut ends the part
        return marker, _past_line_end(buf, marker + len(MARKER)), True
    if newline != -1:  # the file's last line break ends its last document, as its end does
        return newline + 1, newline + 1, final and newline + 1 == len(buf)
    if final and len(buf) <= cap:
        return len(buf), len(buf), True
    end = cap
    # A UTF-8 continuation byte: back up to the character's first byte, not past the part's start (bytes that are not
    # UTF-8 may all be continuation bytes: the part then holds them, and decoding it names the first).
    while end > pos and buf[end] & 0xC0 == 0x80:
        end -= 1
    while end < len(buf) and (end == pos or buf[end] & 0xC0 == 0x80):  # a character longer than 2 * doc_bytes
        end += 1
    return end, end, False


def cuts(buf: bytes, doc_bytes: int, final: bool) -> Iterator[tuple[int, int, int, bool]]:
    """(start, end, next start, ends_document) of each part of `buf`, as far as it can be decided."""
    pos, reach = 0, REACH * doc_bytes + MARKER_LINE
    while pos < len(buf):
        # Most documents are one part, ending at a marker within doc_bytes: _cut's answer, found in one search.
        marker = buf.find(MARKER, pos, pos + doc_bytes + len(MARKER))
        if marker != -1 and (final or len(buf) >= pos + reach):
            cut = marker, _past_line_end(buf, marker + len(MARKER)), True
        elif (cut := _cut(buf, pos, doc_bytes, final)) is None:
            return
        yield pos, *cut
        pos = cut[1]


def after_marker(f: BinaryIO, at: int, size: int, unit_bytes: int) -> int | None:
    """Where the part after the first marker in [at, at + unit_bytes) starts (the file's end if `at` is past it),
    or None when there is no such marker."""
    if at >= size:
        return size
    f.seek(at)
    window = f.read(unit_bytes + MARKER_LINE)
    marker = window.find(MARKER, 0, unit_bytes + len(MARKER))
    if marker == -1:
        return None
    return at + _past_line_end(window, marker + len(MARKER))


def part_start_past(f: BinaryIO, start: int, doc_bytes: int, unit_bytes: int) -> int:
    """The first part start at least unit_bytes after `start` (a part start), or the file's end, by scanning parts."""
    f.seek(start)
    base, buf = start, b""
    while True:
        more = f.read(max(unit_bytes, 2 * REACH * doc_bytes))
        buf, final, pos = buf + more, not more, 0
        for _, _, pos, _ in cuts(buf, doc_bytes, final):
            if base + pos - start >= unit_bytes:
                return base + pos
        if final:
            return base + len(buf)
        base, buf = base + pos, buf[pos:]
