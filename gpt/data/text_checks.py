"""That raw bytes are UTF-8 text: UTF-16, binary bytes and 8-bit encoded text are refused in one line naming the
conversion, as is a lone UTF-16 surrogate, which no UTF-8 holds."""
from __future__ import annotations

import re

BOM = b"\xef\xbb\xbf"  # what Windows editors put before UTF-8 text: a mark, not a character of the first document
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # what a UTF-16 file starts with (little- or big-endian): no UTF-8 text does
SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: JSON can escape one alone, UTF-8 cannot hold it
# The ASCII control characters but whitespace and NUL: text in an 8-bit encoding (Latin-1, Windows-1252) holds none,
# nor does UTF-16 but the NUL beside each ASCII character; random or compressed bytes hold about one in ten. Past
# BINARY_SHARE of them bytes are no text, and converting them as text would make garbage to train on.
CONTROL = bytes([*range(0x01, 0x09), *range(0x0e, 0x20), 0x7f])
BINARY_SHARE = 0.05
WINDOWS_1252 = re.compile(rb"[\x80-\x9f]")  # Windows-1252's printable bytes where latin1 has control characters


def not_utf16(start: bytes, path: str) -> None:
    """Refuse a file whose `start` is a UTF-16 byte order mark."""
    if start.startswith(UTF16_BOMS):
        raise ValueError(f"{path} is UTF-16, not UTF-8: convert it (iconv -f utf-16 -t utf-8)")


def not_binary(raw: bytes, path: str, offset: int) -> None:
    """Refuse `raw`, which is not UTF-8, when more of its bytes are control characters than text in any encoding
    holds."""
    control = len(raw) - len(raw.translate(None, CONTROL))
    if control > BINARY_SHARE * len(raw):
        raise ValueError(f"{path} is not text (binary?): {control / len(raw):.0%} of its bytes from byte offset "
                         f"{offset} are control characters, which text in no encoding holds so many of: give a text "
                         "file")


def utf8(raw: bytes, path: str, offset: int) -> str:
    # UTF-16 (Windows' "Unicode", PowerShell 5's > redirection) is named as such: converted from latin1, as bytes that
    # are not UTF-8 are told to be, it would keep a NUL byte beside each character; without a byte order mark its ASCII
    # is valid UTF-8 and those NULs were trained on. A NUL byte is no text.
    if offset == 0:
        not_utf16(raw, path)
    if (nul := raw.find(b"\x00")) != -1:
        not_binary(raw, path, offset)
        raise ValueError(f"{path} holds a NUL byte at byte offset {offset + nul}, which text does not: it is UTF-16 "
                         "(convert it: iconv -f utf-16le -t utf-8) or binary")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        not_binary(raw, path, offset)
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
