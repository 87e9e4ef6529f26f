"""Corpus preparation: every input format, byte-identical shards whatever the processes and work units, a
validation split stable when files are added, a start-up that reads no text, and faults (SIGKILL, a full disk,
bad inputs, a changed manifest) that leave nothing torn and say what to do in one line."""
from __future__ import annotations

import argparse
import errno
import json
import os
import pickle
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from gpt.__main__ import main as cli
import gpt.atomic as atomic
from gpt.data.corpus import TextData
from gpt.data.inputs import unread_notes
import gpt.data.prepare as prepare_module
from gpt.data.notes import split_note
from gpt.data.prepare import prepare
from gpt.data.prepared import Prepared, check_settings, load, open_prepared
from gpt.data.recipe import Recipe
import gpt.data.shards as shards
from gpt.data.text_checks import BOM
import gpt.data.text_formats as text_formats
from gpt.data.text_parts import MARKER
from gpt.data.tokenizers.base import EOT
import gpt.data.workers as workers
from gpt.data.work_units import Unit
from tests.conftest import ROOT, files_in, play
from tests.test_configs import compose_with
from tests.fuzzing import assert_clean, call, scaled


def stories(count: int, seed: int) -> list[str]:
    """Short seeded documents of a few lines each (under doc_bytes, so each is one part)."""
    rng = random.Random(seed)
    return [play(rng.randint(2, 5), seed=seed * 1000 + i) for i in range(count)]


def write(path: Path, docs: list[str]) -> Path:
    """`docs` in the format `path`'s suffix (or a folder name ending in .dataset) says."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({"id": i, "text": d}) + "\n" for i, d in enumerate(docs)))
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": docs}), path, row_group_size=7)
    elif path.suffix == ".arrow":  # the stream format the datasets cache keeps
        import pyarrow as pa

        table = pa.table({"text": docs})
        with pa.ipc.new_stream(str(path), table.schema) as writer:
            for batch in table.to_batches(max_chunksize=7):
                writer.write_batch(batch)
    elif path.suffix == ".dataset":
        datasets = pytest.importorskip("datasets")
        datasets.Dataset.from_dict({"text": docs}).save_to_disk(str(path))
    else:
        path.write_text("".join(d + EOT + "\n" for d in docs))
    return path


def build(inputs: list[Path], out: Path, num_proc: int = 1, **options: object) -> Prepared:
    recipe = Recipe([str(p) for p in inputs], **{"doc_bytes": 256, "shard_tokens": 500, **options})
    return open_prepared(prepare(recipe, out, num_proc), recipe.tokenizer)


def split_documents(prepared: Prepared) -> dict[str, list[str]]:
    """Each split decoded and cut at end-of-text (char: EOT decodes to its name)."""
    return {split: prepared.tokenizer.decode(ids.to_array().tolist()).split(EOT)[:-1]
            for split, ids in (("train", prepared.train), ("val", prepared.val))}


def shard_bytes(prepared: Prepared) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(prepared.folder.glob("*.bin"))}


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".parquet", ".arrow", ".dataset"])
def test_every_format_gives_its_documents_each_to_one_split(tmp_path: Path, suffix: str) -> None:
    docs = stories(60, seed=1)
    prepared = build([write(tmp_path / f"corpus{suffix}", docs)], tmp_path / "out")
    splits = split_documents(prepared)
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)
    assert 0 < len(splits["val"]) < len(docs) / 3 and prepared.manifest["documents"] == len(docs)


def test_suffixes_are_read_whatever_their_case_and_json_as_json_lines(tmp_path: Path) -> None:
    # Matched case-sensitively, CORPUS.JSONL or train.json were trained on as raw text, JSON syntax included, and a
    # folder's *.TXT were skipped.
    docs = stories(30, seed=2)
    for written, name in ((".jsonl", "CORPUS.JSONL"), (".jsonl", "corpus.json"), (".parquet", "corpus.Parquet")):
        source = write(tmp_path / f"corpus{written}", docs).rename(tmp_path / name)
        splits = split_documents(build([source], tmp_path / f"out-{name}"))
        assert sorted(splits["train"] + splits["val"]) == sorted(docs), name
    write(tmp_path / "folder" / "a.txt", docs[:10]).rename(tmp_path / "folder" / "A.TXT")
    write(tmp_path / "folder" / "b.jsonl", docs[10:]).rename(tmp_path / "folder" / "B.JSONL")
    splits = split_documents(build([tmp_path / "folder"], tmp_path / "out-folder"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)


def test_the_tokenizers_sample_is_counted_in_bytes(tmp_path: Path) -> None:
    # Counted by its progress bar, a tokenizer's 256 MB sample was the whole corpus wherever the bar was off (no
    # terminal: CI, a log), and in characters, CJK text read 3x as many bytes as it meant.
    path = tmp_path / "cjk.txt"
    path.write_text("".join(f"{i}番目の物語です。\n" + EOT + "\n" for i in range(2000)))
    units = text_formats.TextFormat.units(path, 256, "text")
    read = [len(text.encode()) for text in workers.Source(units, workers.Work(Recipe([str(path)])), 1,
                                                                 False).texts(5000)]
    assert 5000 <= sum(read) < 5000 + max(read)


def test_shards_are_byte_identical_whatever_the_processes_and_work_units(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    write(corpus / "b" / "stories.txt", stories(40, seed=2))
    write(corpus / "a.jsonl", stories(30, seed=3))
    write(corpus / "c.parquet", stories(30, seed=4))
    (corpus / "b" / "long.txt").write_text(play(400, seed=5) + "no newline at the end")  # cut into parts
    (corpus / "b" / "wide.txt").write_text("\n" + "é" * 3000)  # a long line, cut between characters
    (corpus / "notes.md").write_text("not part of the corpus")
    one_unit = build([corpus], tmp_path / "one")
    monkeypatch.setattr(text_formats, "UNIT_BYTES", 1000)
    serial, parallel = build([corpus], tmp_path / "serial"), build([corpus], tmp_path / "parallel", num_proc=2)
    assert shard_bytes(one_unit) == shard_bytes(serial) == shard_bytes(parallel)
    strip = lambda m: {**m, "splits": {s: [{**e, "mtime_ns": 0} for e in es] for s, es in m["splits"].items()}}
    assert strip(serial.manifest) == strip(parallel.manifest)
    assert [e["tokens"] for e in serial.manifest["splits"]["train"]][:-1] == [500] * (len(serial.train.arrays) - 1)
    assert len(serial.train.arrays) > 3
    text = "".join(serial.tokenizer.decode(s.to_array().tolist()) for s in (serial.train, serial.val))
    assert text.count("é") == 3000 and "\ufffd" not in text
    assert sorted(line for line in text.replace(EOT, "\n").replace("é", "").splitlines() if line) == sorted(
        "".join(stories(30, 3) + stories(40, 2) + stories(30, 4) + [play(400, seed=5), "no newline at the end"])
        .splitlines())


def test_text_parts_are_the_same_whatever_the_work_units(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Units end after a marker found by a jump, or where a scan of parts ends one: the parts never change; a
    character longer than 2 * doc_bytes is one part (it once cut nothing, forever)."""
    rng = random.Random(13)
    pieces = [EOT, EOT + "\n", EOT + "\r\n", "\n", "\r\n", "a", "é", "🙂", "word ", "x" * 40, "line\n", "<|endof",
              "text|>"]
    path = tmp_path / "a.txt"
    for doc_bytes in (1, 3, 8, 32):
        text = "".join(rng.choice(pieces) for _ in range(300))
        path.write_bytes(BOM * (doc_bytes > 3) + text.encode())
        runs = []
        for unit_bytes in (1 << 20, 1, 17, 200):
            monkeypatch.setattr(text_formats, "UNIT_BYTES", unit_bytes)
            runs.append([part for unit in text_formats.TextFormat.units(path, doc_bytes, "text")
                         for part in text_formats.TextFormat.parts(unit, doc_bytes, "text")])
        assert runs[1:] == runs[:1] * 3
        unmarked = re.sub(re.escape(EOT) + "(\r?\n)?", "", text)  # one pass: a marker that joining forms stays
        assert "".join(part.text for part in runs[0]) == unmarked.replace("\r\n", "\n")


TEXT_BYTES = [b"\x80", b"\xbf", b"\xc3", b"\xe2\x82", "🙂".encode(), b"\xff", b"a", b"\n", b"\r\n", b"\r",
              MARKER, MARKER + b"\n", b"<|endof", BOM]  # UTF-8, and pieces of it


@given(pieces=st.lists(st.sampled_from(TEXT_BYTES), max_size=60), doc_bytes=st.sampled_from([1, 2, 8]),
       unit_bytes=st.sampled_from([1, 17, 1 << 20]))
@example(pieces=[b"\x80"] * 3, doc_bytes=1, unit_bytes=1 << 20)  # an IndexError: the cut backed up past the buffer
@example(pieces=[b"\x80"] * 3 + ["🙂".encode()], doc_bytes=1, unit_bytes=1 << 20)  # the three bytes dropped unread
@settings(max_examples=scaled(200))
def test_text_bytes_are_read_exactly_or_refused_as_not_utf8(pieces: list[bytes], doc_bytes: int,
                                                            unit_bytes: int) -> None:
    """A long line cut between characters backed up over continuation bytes past its part's start: bytes that are
    not UTF-8 were dropped without a word, or ended in an IndexError, instead of being named."""
    raw = b"".join(pieces)
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(text_formats, "UNIT_BYTES", unit_bytes)
        path = Path(folder) / "a.txt"
        path.write_bytes(raw)
        try:
            text = "".join(part.text for unit in text_formats.TextFormat.units(path, doc_bytes, "text")
                           for part in text_formats.TextFormat.parts(unit, doc_bytes, "text"))
        except ValueError as err:
            named = rf"{re.escape(str(path))} is not UTF-8: byte 0x.. at byte offset \d+ \(convert it.*"
            assert re.fullmatch(named, str(err)), err
            with pytest.raises(UnicodeDecodeError):
                raw.removeprefix(BOM).decode()
            return
    unmarked = re.sub(re.escape(EOT) + "(\r?\n)?", "", raw.removeprefix(BOM).decode())
    assert text == unmarked.replace("\r\n", "\n")


UNIX_PIECES = [b"a", "🙂".encode(), b"\n", b"\n\n", b"word ", b"x" * 20, MARKER, MARKER + b"\n"]


@given(pieces=st.lists(st.sampled_from(UNIX_PIECES), max_size=80), doc_bytes=st.sampled_from([1, 2, 8, 16]),
       unit_bytes=st.sampled_from([1, 17, 1 << 20]))
@example(pieces=[b"x" * 20, b"\n"] * 4, doc_bytes=16, unit_bytes=1 << 20)  # each line a piece of its own, or two
@settings(max_examples=scaled(200))
def test_a_long_document_with_windows_line_endings_is_cut_as_its_unix_copy_is(pieces: list[bytes], doc_bytes: int,
                                                                             unit_bytes: int) -> None:
    """Its pieces were measured in the file's bytes, each \\r included: a document longer than doc_bytes was cut
    into other pieces, and so held out other text, than the same text with \\n line endings."""
    unix = b"".join(pieces)
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(text_formats, "UNIT_BYTES", unit_bytes)
        runs = []
        for name, raw in (("unix.txt", unix), ("windows.txt", unix.replace(b"\n", b"\r\n"))):
            path = Path(folder) / name
            path.write_bytes(raw)
            runs.append([part for unit in text_formats.TextFormat.units(path, doc_bytes, "text")
                         for part in text_formats.TextFormat.parts(unit, doc_bytes, "text")])
    assert runs[1] == runs[0]


def test_windows_line_endings_and_a_byte_order_mark_prepare_as_unix_text_does(tmp_path: Path) -> None:
    """A file saved on Windows trains on the same tokens as its Unix copy: once each document after the first began
    with a stray \\r\\n, every line ended with a \\r the model learned, and the mark was the first document's
    first character."""
    docs = stories(40, seed=21)
    unix, long = write(tmp_path / "unix.txt", docs), tmp_path / "long.txt"  # and one document of many pieces
    long.write_text("".join(docs))
    for path in (unix, long):
        windows = tmp_path / f"windows-{path.name}"
        windows.write_bytes(BOM + path.read_bytes().replace(b"\n", b"\r\n"))
        for tokenizer in ("char", "word"):
            prepared = [build([each], tmp_path / f"{each.stem}-{tokenizer}", tokenizer=tokenizer)
                        for each in (path, windows)]
            assert shard_bytes(prepared[1]) == shard_bytes(prepared[0])
            assert prepared[1].tokenizer.to_dict() == prepared[0].tokenizer.to_dict()


def test_a_jsonl_file_saved_on_windows_prepares_as_its_unix_copy_does(tmp_path: Path) -> None:
    """A byte order mark before a blank first line made that line 'not JSON' (json.loads drops the mark only before
    JSON), while the Unix copy skips the blank line."""
    unix = tmp_path / "unix.jsonl"
    unix.write_bytes(b"\n" + write(tmp_path / "docs.jsonl", stories(20, seed=22)).read_bytes())
    windows = tmp_path / "windows.jsonl"
    windows.write_bytes(BOM + unix.read_bytes().replace(b"\n", b"\r\n"))
    prepared = [build([path], tmp_path / path.stem) for path in (unix, windows)]
    assert shard_bytes(prepared[1]) == shard_bytes(prepared[0])
    assert prepared[1].tokenizer.to_dict() == prepared[0].tokenizer.to_dict()


def test_every_text_document_ends_with_one_end_of_text(tmp_path: Path) -> None:
    """Even one whose doc_bytes line cut falls right before its marker, or that is cut into many parts, or the last
    of a file with no marker, cut into parts whose last ends at the file's last line break (it once had none: its
    text ran on into the next file's, and it was not counted)."""
    docs = ["x" * 255 + "\n", "short\n", "a line\n" * 200, "no newline before the marker"]
    prepared = build([write(tmp_path / "a.txt", docs)], tmp_path / "out", val_fraction=1e-9)
    assert prepared.tokenizer.decode(prepared.train.to_array().tolist()) == EOT.join(docs) + EOT
    assert prepared.manifest["documents"] == len(docs) and len(prepared.val) == 0
    (tmp_path / "b.txt").write_text("another line\n" * 40)
    prepared = build([tmp_path / "b.txt"], tmp_path / "unmarked", val_fraction=1e-9)
    assert prepared.tokenizer.decode(prepared.train.to_array().tolist()) == "another line\n" * 40 + EOT
    assert prepared.manifest["documents"] == 1


@pytest.mark.parametrize("empty", ["eot.txt", "blank.jsonl", "zero.txt"])
def test_a_file_of_empty_documents_adds_nothing_as_an_empty_file_does(tmp_path: Path, empty: str) -> None:
    """Only end-of-text markers, or JSONL rows of "": no text, so skipped beside other files, and alone an empty
    corpus (once a TypeError from a unit with no parts)."""
    texts = {"eot.txt": EOT + EOT + "\n" + EOT, "blank.jsonl": '{"text": ""}\n' * 3, "zero.txt": ""}
    (tmp_path / empty).write_text(texts[empty])
    text = write(tmp_path / "a.txt", stories(30, seed=14))
    alone = build([text], tmp_path / "alone")
    beside = build([text, tmp_path / empty], tmp_path / "beside", num_proc=2)
    assert shard_bytes(beside) == shard_bytes(alone) and beside.manifest["documents"] == 30
    with pytest.raises(ValueError, match=rf"^no text in {tmp_path / empty}: the corpus is empty$"):
        build([tmp_path / empty], tmp_path / "empty")


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_a_null_text_in_a_table_is_refused_naming_its_row_as_a_jsonl_null_is(tmp_path: Path, suffix: str) -> None:
    """A null was skipped without a word, while a JSONL null is refused; an empty text adds nothing in both."""
    docs: list[str | None] = [*stories(20, seed=16), ""]
    beside = build([write(tmp_path / f"empty{suffix}", docs)], tmp_path / "empty")
    assert beside.manifest["documents"] == 20
    docs[17] = None  # in the third row group of seven rows, or the third Arrow batch
    nulls = write(tmp_path / f"nulls{suffix}", docs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=rf"^{nulls} row 17 \(counting from 0\) has a null 'text', not a string: "
                                         "drop or fill the rows whose 'text' is null, or set data.text_field="):
        build([nulls], tmp_path / "nulls")


def test_an_arrow_stream_cut_short_at_a_batch_is_refused_naming_the_file(tmp_path: Path) -> None:
    """A copy or download stopped between two record batches reads as a whole stream of fewer rows: the corpus
    trained on 2 of its 3 batches without a word. A stream's writer ends it with an end-of-stream marker."""
    whole = write(tmp_path / "whole.arrow", stories(21, seed=17))  # three batches of seven rows
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.memory_map(str(whole))).read_all()
    sink = pa.BufferOutputStream()
    writer = pa.ipc.new_stream(sink, table.schema)
    for batch in table.to_batches(max_chunksize=7)[:2]:
        writer.write_batch(batch)
    cut = tmp_path / "cut.arrow"
    cut.write_bytes(sink.getvalue().to_pybytes())  # the first two batches, byte for byte, and no end marker
    assert whole.read_bytes().startswith(cut.read_bytes())
    with pytest.raises(ValueError, match=rf"^{cut} is cut short \(an Arrow stream without its end-of-stream marker\): "
                                         "copy it again, or write it again"):
        build([cut], tmp_path / "out")
    assert build([whole], tmp_path / "whole").manifest["documents"] == 21


def test_an_arrow_ipc_file_reads_as_an_arrow_stream_does(tmp_path: Path) -> None:
    """Arrow's file format (Feather v2: pyarrow's ipc.new_file, polars' write_ipc, R's write_feather), often saved as
    *.arrow, was refused as "not an Arrow stream file", though the docs read Arrow files."""
    import pyarrow as pa

    docs = stories(40, seed=18)
    table = pa.table({"text": docs})
    with pa.ipc.new_file(str(tmp_path / "corpus.arrow"), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=7):
            writer.write_batch(batch)
    as_file = build([tmp_path / "corpus.arrow"], tmp_path / "file")
    as_stream = build([write(tmp_path / "stream" / "corpus.arrow", docs)], tmp_path / "stream-out")
    assert split_documents(as_file) == split_documents(as_stream)
    assert sorted(sum(split_documents(as_file).values(), [])) == sorted(docs)
    cut = tmp_path / "cut.arrow"
    cut.write_bytes((tmp_path / "corpus.arrow").read_bytes()[:-20])  # its footer gone
    with pytest.raises(ValueError, match=rf"^{cut} is not an Arrow file \(.*\): copy it again, or write it again"):
        build([cut], tmp_path / "cut")


def test_a_feather_file_reads_as_arrow_named_alone_and_in_a_folder(tmp_path: Path) -> None:
    """*.feather is what pyarrow's and pandas' write_feather name Arrow's file format: named alone it was read as
    text (its bytes as garbage), and in a folder it was left out with a note to rename it *.txt."""
    import pyarrow as pa
    import pyarrow.feather as feather

    docs = stories(40, seed=29)
    alone = tmp_path / "corpus.feather"
    feather.write_feather(pa.table({"text": docs[:30]}), str(alone), chunksize=7)
    splits = split_documents(build([alone], tmp_path / "alone"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs[:30])
    folder = tmp_path / "folder"
    write(folder / "a.txt", docs[30:])
    alone.rename(folder / "B.Feather")
    assert unread_notes([str(folder)], "{}") == []
    splits = split_documents(build([folder], tmp_path / "folder-out"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)


# pyarrow warns that it will stop reading Feather v1; while it reads it, so does the project
@pytest.mark.filterwarnings("ignore:Feather V1 files are deprecated:DeprecationWarning")
def test_a_feather_v1_file_reads_as_a_v2_one_does(tmp_path: Path) -> None:
    """Feather v1 (write_feather's version=1, what pandas wrote before pyarrow 0.17) was refused as "not an Arrow
    file", with a hint to rename it *.txt, though pyarrow reads it."""
    import pyarrow as pa
    import pyarrow.feather as feather

    docs = stories(40, seed=31)
    table = pa.table({"id": list(range(30)), "text": docs[:30]})
    feather.write_feather(table, str(tmp_path / "v1.feather"), version=1)
    feather.write_feather(table, str(tmp_path / "v2.feather"), chunksize=7)
    assert (tmp_path / "v1.feather").read_bytes()[:4] == b"FEA1"
    as_v1 = split_documents(build([tmp_path / "v1.feather"], tmp_path / "v1"))
    assert as_v1 == split_documents(build([tmp_path / "v2.feather"], tmp_path / "v2"))
    folder = tmp_path / "folder"
    write(folder / "a.txt", docs[30:])
    (tmp_path / "v1.feather").rename(folder / "b.feather")
    splits = split_documents(build([folder], tmp_path / "folder-out"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)
    cut = tmp_path / "cut.feather"
    cut.write_bytes((folder / "b.feather").read_bytes()[:-8])  # its footer's length and closing magic gone
    with pytest.raises(ValueError, match=rf"^{cut} is not an Arrow file \(.*\): copy it again, or write it again"):
        build([cut], tmp_path / "cut")


def test_the_commands_a_refusal_names_read_a_path_starting_with_a_dash_as_a_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file -array.json or a folder -out in the folder the user is in was named bare in the command a refusal
    suggests, which read it as an option: jq's (Unknown arguments), and prepare's --out (expected one argument)."""

    from gpt.data.prepare_command import add_arguments

    docs = stories(12, seed=33)
    monkeypatch.chdir(tmp_path)
    Path("-array.json").write_text(json.dumps([{"text": doc} for doc in docs]))
    with pytest.raises(ValueError, match=r"^-array.json is a JSON array") as err:
        build([Path("-array.json")], tmp_path / "refused")
    command = re.search(r"e\.g\. (jq .*)$", str(err.value))[1].replace("<new file>", "records")
    subprocess.run(command, shell=True, check=True)
    splits = split_documents(build([Path("records.jsonl")], tmp_path / "records"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)
    fix = prepare_module.remake(Path("-out"), cached=False)
    words = shlex.split(re.search(r"\((python -m gpt prepare .*)\)$", fix)[1])
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert Path(parser.parse_args(words[4:]).out) == Path("-out")


def test_a_text_field_for_plain_text_inputs_alone_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Plain text has no fields: data.text_field (prepare's --text-field) was ignored without a word, and JSONL saved as
    *.txt, the mistake it points at, trained its JSON syntax as text."""
    notes = tmp_path / "notes.txt"
    notes.write_text("".join(json.dumps({"body": doc}) + "\n" for doc in stories(20, seed=21)))
    data = lambda path, **given: TextData(block_size=8, path=path, text_field="body", root=str(tmp_path / "data"),  # noqa: E731
                                          num_proc=1, **given)
    with pytest.raises(ValueError, match=rf"^data.text_field=body names a JSONL key or a table's column, and "
                                         rf"data.path={notes} is plain text, read whole: drop data.text_field, or give "
                                         r"the file its format's suffix \(\*.jsonl, \*.parquet, \*.arrow\)$"):
        data(str(notes), given=["text_field"]).vocab_size
    assert not (tmp_path / "data").exists()
    assert cli(["prepare", str(notes), "--text-field", "body", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (f"error: --text-field body names a JSONL key or a table's column, and {notes} "
                                       "is plain text, read whole: drop --text-field, or give the file its format's "
                                       "suffix (*.jsonl, *.parquet, *.arrow)\n")
    records = notes.rename(tmp_path / "notes.jsonl")
    mixed = data([str(records), str(write(tmp_path / "more.txt", stories(5, seed=22)))], given=["text_field"])
    assert mixed.corpus.manifest["documents"] == 25  # one input has fields: the setting is read


def test_a_validation_file_is_all_of_validation_and_nothing_else_is(tmp_path: Path) -> None:
    """data.val_path: a fixed held-out text (nanoGPT's last 10%), whose characters the vocabulary learns too."""
    train_docs, val_docs = stories(30, seed=8), [d + " ~ only here" for d in stories(10, seed=9)]
    train, val = write(tmp_path / "train.txt", train_docs), write(tmp_path / "held" / "val.jsonl", val_docs)
    prepared = build([train], tmp_path / "out", val_inputs=[str(tmp_path / "held")])
    assert split_documents(prepared) == {"train": train_docs, "val": val_docs}
    assert "every part of val_inputs" in prepared.manifest["validation"]
    with pytest.raises(ValueError, match=r"is in both data.path and data.val_path"):
        build([train, val], tmp_path / "both", val_inputs=[str(val)])
    with pytest.raises(ValueError, match=r"^data.val_path=\S*missing.txt does not exist"):
        build([train], tmp_path / "missing", val_inputs=[str(tmp_path / "missing.txt")])
    with pytest.raises(ValueError, match=r"^data.val_path=\S*missing.txt does not exist"):
        load(Recipe([str(train)], [str(tmp_path / "missing.txt")]), tmp_path / "data")  # how a run finds its shards
    with pytest.raises(ValueError, match=r"prepared already.*drop data.val_path"):
        load(Recipe([str(tmp_path / "out")], [str(val)]), tmp_path)
    # A fraction beside named validation text was ignored without a word: the text is all of validation.
    with pytest.raises(ValueError, match=r"^data.val_fraction=0.3 splits nothing when the validation text is named"):
        Recipe([str(train)], [str(val)], val_fraction=0.3)


def test_validation_documents_stay_validation_when_files_are_added(tmp_path: Path) -> None:
    first, second = write(tmp_path / "a.txt", stories(60, seed=6)), write(tmp_path / "b.txt", stories(60, seed=7))
    alone = split_documents(build([first], tmp_path / "alone"))
    both = split_documents(build([first, second], tmp_path / "both"))
    assert set(alone["val"]) == set(both["val"]) & set(stories(60, seed=6)) != set()
    assert set(alone["train"]) <= set(both["train"])


def test_prepared_corpus_starts_without_reading_text_or_hashing_shards(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = Recipe([str(write(tmp_path / "a.txt", stories(60, seed=8)))], doc_bytes=256, shard_tokens=500)
    first = load(recipe, tmp_path / "data", num_proc=1)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a prepared corpus was read or hashed again")

    monkeypatch.setattr(text_formats.TextFormat, "parts", forbidden)
    monkeypatch.setattr(text_formats.TextFormat, "units", forbidden)
    monkeypatch.setattr(shards, "file_sha256", forbidden)
    again = load(recipe, tmp_path / "data", num_proc=1)
    assert again.folder == first.folder and shard_bytes(again) == shard_bytes(first)
    sent = pickle.dumps(again.train)  # what ddp_spawn sends each rank: the paths, not the ids
    assert len(sent) < 2000 < sum(a.nbytes for a in again.train.arrays)
    assert isinstance(pickle.loads(sent).arrays[0], np.memmap)


def test_command_line_prepares_what_training_then_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture) -> None:
    corpus, root = write(tmp_path / "a.jsonl", stories(60, seed=12)), tmp_path / "data"
    assert cli(["prepare", str(corpus), "--root", str(root), "--doc-bytes", "256", "--num-proc", "1"]) == 0
    command = capsys.readouterr().out.split("train with: python train.py data=text ")[1].split()
    # data.root named: without it the printed command prepared the corpus again under data/shards/
    assert command == [f"data.path={corpus}", "data.tokenizer=char", "data.doc_bytes=256", f"data.root={root}"]
    monkeypatch.setattr(prepare_module, "build", lambda *args: pytest.fail("prepared a second time"))
    settings = {key.removeprefix("data."): OmegaConf.create(f"v: {value}").v
                for key, value in (override.split("=", 1) for override in command)}
    data = TextData(block_size=8, num_proc=1, **settings)  # the run the printed command starts
    assert sorted(sum(split_documents(data.corpus).values(), [])) == sorted(stories(60, seed=12))
    yaml = OmegaConf.load(ROOT / "configs" / "data" / "text.yaml")  # train.py's defaults are the command's
    defaults = {name: value for name, value in vars(Recipe()).items() if name not in ("inputs", "val_inputs")}
    assert {name: yaml[name] for name in defaults} == defaults and yaml.val_path is None
    monkeypatch.undo()
    held = write(tmp_path / "held.txt", stories(5, seed=13))
    assert cli(["prepare", str(corpus), "--val", str(held), "--root", str(root), "--num-proc", "1"]) == 0
    command = shlex.split(capsys.readouterr().out.split("train with: python train.py data=text ")[1])
    assert command == [f"data.path={corpus}", "data.tokenizer=char", f"data.val_path=[{held}]", f"data.root={root}"]
    settings = {key.removeprefix("data."): OmegaConf.create(f"v: {value}").v
                for key, value in (override.split("=", 1) for override in command)}
    data = TextData(block_size=8, num_proc=1, **settings)
    assert split_documents(data.corpus)["val"] == stories(5, seed=13) and data.meta["val_path"] == str(held)
    # A relative --root or --out is named absolute, as the inputs are: run from another folder, the printed command
    # read them from there, found nothing, and prepared the corpus again.
    monkeypatch.chdir(tmp_path)
    assert cli(["prepare", str(corpus), "--root", "data2", "--num-proc", "1"]) == 0
    assert f"data.root={tmp_path / 'data2'}" in capsys.readouterr().out.split()
    assert cli(["prepare", str(corpus), "--num-proc", "1"]) == 0  # the default --root too
    assert f"data.root={tmp_path / 'data'}" in capsys.readouterr().out.split()
    assert cli(["prepare", str(corpus), "--out", "relative", "--num-proc", "1"]) == 0
    assert f"data.path={tmp_path / 'relative'}" in capsys.readouterr().out.split()
    out = tmp_path / "out"
    assert cli(["prepare", str(corpus), "--out", str(out), "--doc-bytes", "256", "--num-proc", "1"]) == 0
    capsys.readouterr()
    write(corpus, stories(61, seed=12))  # the input changed since
    assert cli(["prepare", str(corpus), "--out", str(out), "--doc-bytes", "256", "--num-proc", "1"]) == 2
    assert capsys.readouterr().err == f"error: {out} holds a corpus prepared from other inputs or settings: delete " \
                                      "it or choose another --out\n"
    assert cli(["prepare", str(corpus), "--out", str(tmp_path), "--num-proc", "1"]) == 2
    assert "exists and is not a prepared corpus" in capsys.readouterr().err
    # Preparation leaves nothing at --out unless whole, so what is there is the user's: it said to delete the input
    assert cli(["prepare", str(corpus), "--out", str(corpus), "--num-proc", "1"]) == 2
    assert capsys.readouterr().err == f"error: {corpus} exists and is not a prepared corpus (no manifest.json): " \
                                      "choose another --out, a folder that does not exist yet\n"


def prepare_options(text: str) -> argparse.Namespace:
    """The options of a suggested `prepare it again with ...` as prepare's own parser reads them."""
    from gpt.data.prepare_command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["corpus.txt", *shlex.split(text)])


@pytest.mark.parametrize("made_with, given", [('my field, "x"', "it's = [a]"), ("a${b}", "{c: 1}"),
                                               ("a\\${b}", "a b")])
def test_a_refused_setting_of_a_prepared_folder_pastes_back_as_the_folder_and_the_run_have_it(
        tmp_path: Path, made_with: str, given: str) -> None:
    """The advice wrote the folder's text field bare: `set data.text_field=my field, "x"` pasted as three words, the
    comma a sweep in Hydra, a ${ an interpolation; and `--text-field it's = [a]` left a quote open in the shell."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    manifest = {"recipe": vars(Recipe(text_field=made_with)), "tokenizer": {}}
    with pytest.raises(ValueError, match="keeps its own: set ") as refused:
        check_settings(Recipe(text_field=given), tmp_path, manifest)
    advice, again = str(refused.value).split("keeps its own: set ")[1].split(", or prepare it again with ")
    [word] = shlex.split(advice)
    override = OverridesParser.create().parse_override(word)
    assert override.key_or_group == "data.text_field" and not override.is_sweep_override()
    assert compose_with("data=text", word).data.text_field == made_with  # as the run reads it
    assert prepare_options(again).text_field == given


def test_a_folder_prepared_with_another_tokenizer_names_the_run_s_folder_whole(tmp_path: Path) -> None:
    """`prepare it again with --tokenizer /models/my tok, v2` split in the shell into three words."""
    prepared = build([write(tmp_path / "a.txt", stories(20, seed=1))], tmp_path / "prepared")
    with pytest.raises(ValueError, match="set data.tokenizer=char, or prepare it again with ") as refused:
        open_prepared(prepared.folder, "/models/my tok, v2")
    assert prepare_options(str(refused.value).split("prepare it again with ")[1]).tokenizer == "/models/my tok, v2"


def test_a_suggested_option_whose_value_starts_with_a_dash_reads_as_its_value(tmp_path: Path) -> None:
    """`--tokenizer -tok` and `--text-field -body`: argparse took the value for an option and refused the command."""
    prepared = build([write(tmp_path / "a.txt", stories(20, seed=1))], tmp_path / "prepared")
    with pytest.raises(ValueError, match="prepare it again with ") as refused:
        open_prepared(prepared.folder, "-tok")
    assert prepare_options(str(refused.value).split("prepare it again with ")[1]).tokenizer == "-tok"
    manifest = {"recipe": vars(Recipe(text_field="text")), "tokenizer": {}}
    with pytest.raises(ValueError, match="prepare it again with ") as refused:
        check_settings(Recipe(text_field="-body"), tmp_path, manifest)
    assert prepare_options(str(refused.value).split("prepare it again with ")[1]).text_field == "-body"


def test_the_printed_train_command_pastes_whole_whatever_the_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """Printed as typed, a path with a space split in the shell, and one with a comma became a list of its pieces
    in Hydra (data.path=/x/a does not exist); a quote or an = broke the override."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    folder = tmp_path / "my notes, v2 = 'draft' \"b\""
    corpus, held = write(folder / "a,b.txt", stories(60, seed=14)), write(folder / "held=1.txt", stories(5, seed=15))
    for args in ([corpus, "--val", held], [corpus, held, "--doc-bytes", "256"], [corpus, "--out", folder / "out, 2"]):
        assert cli(["prepare", *map(str, args), "--root", str(folder / "data"), "--num-proc", "1"]) == 0
        line = shlex.split(capsys.readouterr().out.split("train with: ")[1])
        assert line[:3] == ["python", "train.py", "data=text"]
        overrides = OverridesParser.create().parse_overrides(line[3:])
        assert not any(override.is_sweep_override() for override in overrides)
        settings = {override.key_or_group.removeprefix("data."): override.value() for override in overrides}
        monkeypatch.setattr(prepare_module, "build", lambda *args: pytest.fail("prepared a second time"))
        data = TextData(block_size=8, num_proc=1, **settings)  # the run the printed command starts
        assert sorted(sum(split_documents(data.corpus).values(), [])) == sorted(
            stories(60, seed=14) + stories(5, seed=15) * (held in args))
        monkeypatch.undo()


def test_a_bpe_vocabulary_smaller_than_asked_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--vocab-size 4000 on a few stories trained a vocabulary of a few hundred tokens without a word, while a sweep
    over data.vocab_size read as if each size had been tried."""
    write(tmp_path / "few.jsonl", stories(40, seed=3))
    assert cli(["prepare", str(tmp_path / "few.jsonl"), "--out", str(tmp_path / "few"), "--tokenizer", "bpe",
                "--vocab-size", "4000", "--num-proc", "1"]) == 0
    size = open_prepared(tmp_path / "few", "bpe").tokenizer.vocab_size
    note = f"note: the bpe vocabulary of {tmp_path / 'few'} has {size:,} tokens, fewer than vocab_size=4,000 asks"
    assert size < 4000 and note in capsys.readouterr().out
    assert any(n.startswith(note.removeprefix("note: ")) for n in TextData(block_size=4, path=str(tmp_path / "few"),
                                                                         tokenizer="bpe").notes)
    assert cli(["prepare", str(tmp_path / "few.jsonl"), "--out", str(tmp_path / "small"), "--tokenizer", "bpe",
                "--vocab-size", "300", "--num-proc", "1"]) == 0
    assert "vocabulary of" not in capsys.readouterr().out


def test_a_split_far_from_val_fraction_is_noted_where_the_corpus_is_prepared_and_trained(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Six short documents, each held out whole by its hash: 42% of the tokens were validation at val_fraction
    0.1 without a word, and the run's held-out loss was of that share. Four hundred split near the fraction, and
    say nothing."""
    write(tmp_path / "few.jsonl", stories(6, seed=0))
    assert cli(["prepare", str(tmp_path / "few.jsonl"), "--out", str(tmp_path / "few"), "--num-proc", "1"]) == 0
    out = capsys.readouterr().out
    prepared = open_prepared(tmp_path / "few", None)
    share = len(prepared.val) / (len(prepared.train) + len(prepared.val))
    assert share > 0.2
    assert f"note: {share:.0%} of {tmp_path / 'few'}'s tokens are validation, where val_fraction=0.1 asks for 10%: " \
           "each document, or ~4,096-byte piece of a long one, goes to a split by the hash of its text" in out
    assert TextData(block_size=4, path=str(tmp_path / "few")).notes == [split_note(prepared)]
    write(tmp_path / "many.jsonl", stories(400, seed=6))
    assert cli(["prepare", str(tmp_path / "many.jsonl"), "--out", str(tmp_path / "many"), "--num-proc", "1"]) == 0
    assert "note:" not in capsys.readouterr().out
    assert TextData(block_size=4, path=str(tmp_path / "many")).notes == []


@pytest.mark.parametrize("tokenizer", ["char", "bpe"])
def test_compact_vocab_with_a_tokenizer_it_does_not_apply_to_is_refused(tmp_path: Path, tokenizer: str,
                                                                        capsys: pytest.CaptureFixture) -> None:
    """--compact-vocab true with a char or bpe tokenizer prepared the folder, stored the setting and did nothing."""
    corpus = write(tmp_path / "play.txt", stories(5, seed=3))
    assert cli(["prepare", str(corpus), "--tokenizer", tokenizer, "--compact-vocab", "true", "--out",
                str(tmp_path / "out"), "--num-proc", "1"]) == 2
    assert capsys.readouterr().err == f"error: --compact-vocab true keeps only the GPT-2 ids a corpus uses; " \
                                      f"--tokenizer {tokenizer} is not compacted: drop --compact-vocab\n"


@pytest.mark.parametrize("tokenizer", ["char", "gpt2"])
def test_vocab_size_with_a_tokenizer_that_trains_no_bpe_is_refused(tmp_path: Path, tokenizer: str,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """--vocab-size 300 with the char tokenizer prepared the corpus and printed a train command holding
    data.vocab_size=300, which train.py refuses beside data.tokenizer=char."""
    corpus = write(tmp_path / "play.txt", stories(5, seed=3))
    assert cli(["prepare", str(corpus), "--tokenizer", tokenizer, "--vocab-size", "300", "--root",
                str(tmp_path / "data"), "--num-proc", "1"]) == 2
    assert capsys.readouterr().err == f"error: --vocab-size 300 sizes the BPE trained on a corpus; --tokenizer " \
                                      f"{tokenizer} trains none: drop --vocab-size\n"
    assert not (tmp_path / "data").exists()
    assert not (tmp_path / "out").exists()


def test_a_preparation_with_nothing_to_validate_on_says_so_instead_of_a_train_command(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A short single-document text is one part: it printed 0 validation tokens and a train command that failed."""
    corpus = write(tmp_path / "play.txt", stories(1, seed=3))
    assert cli(["prepare", str(corpus), "--root", str(tmp_path / "data"), "--val-fraction", "0.01",
                "--num-proc", "1"]) == 2
    out = capsys.readouterr()
    error = out.err.splitlines()[-1]  # after the progress bars
    assert "train with" not in out.out and error.startswith(f"error: {tmp_path / 'data'}")
    assert "no part of its 1 document fell in the validation split" in error
    assert "prepare it again with a smaller --doc-bytes than 4096 or a larger --val-fraction than 0.01" in error
    folder = tmp_path / "out"  # never overwritten: prepared again as the line said, it was refused for being there
    argv = ["prepare", str(corpus), "--out", str(folder), "--val-fraction", "0.01", "--num-proc", "1"]
    assert cli(argv) == 2
    assert "delete it and prepare it again with a smaller --doc-bytes" in capsys.readouterr().err.splitlines()[-1]
    assert cli([*argv, "--doc-bytes", "64"]) == 2
    assert capsys.readouterr().err.endswith("holds a corpus prepared from other inputs or settings: delete it or "
                                            "choose another --out\n")


@pytest.mark.parametrize("case", ["all validation", "empty --val", "empty training beside --val"])
def test_a_preparation_with_nothing_to_train_on_or_an_empty_validation_file_says_so(
        tmp_path: Path, case: str, capsys: pytest.CaptureFixture) -> None:
    """An empty training split printed a train command that failed; an empty --val file was told of hashes and
    --val-fraction, which split nothing beside it, and to name validation files with --val."""
    corpus, empty = write(tmp_path / "play.txt", stories(1, seed=3)), tmp_path / "empty.txt"
    empty.write_text(EOT + "\n")
    flags = {"all validation": [str(corpus), "--val-fraction", "0.99"],
             "empty --val": [str(corpus), "--val", str(empty)],
             "empty training beside --val": [str(empty), "--val", str(corpus)]}[case]
    out = tmp_path / "out"
    assert cli(["prepare", *flags, "--out", str(out), "--num-proc", "1"]) == 2
    printed = capsys.readouterr()
    assert "train with" not in printed.out
    expected = {"all validation": "every part of its 1 document fell in the validation split (each document, or "
                                  "~--doc-bytes piece of a long one, goes there by the hash of its text with chance "
                                  "--val-fraction): delete it and prepare it again with a smaller --doc-bytes than "
                                  "4096 or a smaller --val-fraction than 0.99, or name validation files with --val",
                "empty --val": f"its validation split is empty, as {empty} holds no text",
                "empty training beside --val": f"its training split is empty, as {empty} holds no text"}[case]
    assert printed.err.splitlines()[-1].startswith(f"error: {out}: {expected}")


def test_a_gpt2_folder_is_read_with_the_vocabulary_it_was_prepared_with_or_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """data.compact_vocab=false on a folder prepared compact once trained on the compact ids without a word (and
    init_from=<a GPT-2> then asked for the very setting given); --compact-vocab prepares either vocabulary."""
    corpus = write(tmp_path / "a.txt", stories(30, seed=16))
    for name, flags in (("compact", []), ("full", ["--compact-vocab", "false"])):
        assert cli(["prepare", str(corpus), "--tokenizer", "gpt2", "--out", str(tmp_path / name), "--num-proc", "1",
                    *flags]) == 0
    capsys.readouterr()
    assert cli(["prepare", str(corpus), "--tokenizer", "gpt2", "--compact-vocab", "false", "--root",
                str(tmp_path / "data"), "--num-proc", "1"]) == 0
    assert "data.compact_vocab=false" in capsys.readouterr().out.split()  # as a command line writes it, not False

    def data(name: str, compact_vocab: bool | None) -> TextData:
        return TextData(block_size=8, path=str(tmp_path / name), tokenizer="gpt2", compact_vocab=compact_vocab)

    used = data("compact", None).vocab_size
    assert used < 50257 // 2 and data("compact", True).vocab_size == used
    assert data("full", None).vocab_size == data("full", False).vocab_size == 50257
    with pytest.raises(ValueError, match=rf"^data.compact_vocab=false is not what {tmp_path / 'compact'} was prepared "
                       rf"with \(a compact vocabulary of {used} ids\), and a prepared folder keeps its own: set "
                       "data.compact_vocab=true, or prepare it again with --compact-vocab false$"):
        data("compact", False).vocab_size
    with pytest.raises(ValueError, match=r"^data.compact_vocab=true is not what .* \(GPT-2's full vocabulary\)"):
        data("full", True).vocab_size


def test_a_prepared_folders_refusal_names_its_value_where_a_preset_sets_the_setting_too(tmp_path: Path) -> None:
    """experiment=tinystories sets data.vocab_size=512: on a folder prepared with --vocab-size 300, the command
    line's data.vocab_size=400 was refused with 'drop data.vocab_size', which left the preset's 512, refused in turn."""
    assert compose_with("experiment=tinystories").data.vocab_size == 512
    folder = tmp_path / "bpe"
    assert cli(["prepare", str(write(tmp_path / "a.txt", stories(30, seed=5))), "--tokenizer", "bpe", "--vocab-size",
                "300", "--out", str(folder), "--num-proc", "1"]) == 0

    def data(vocab_size: int) -> TextData:
        return TextData(block_size=8, path=str(folder), tokenizer="bpe", vocab_size=vocab_size, given=["vocab_size"])

    with pytest.raises(ValueError, match=r"keeps its own: set data.vocab_size=300, or prepare it again with "
                                         "--vocab-size=400$"):
        data(400).vocab_size
    assert data(300).vocab_size == 300


@pytest.mark.parametrize("args, message", [
    (["nope.txt"], "nope.txt does not exist: point it at a text"),
    (["a.txt", "--val", "nope.txt"], "--val nope.txt does not exist: point it at a text"),
    (["a.txt", "--val", "./a.txt"], "{a} is in both the inputs and --val: validation text must be held out"),
    (["a.txt", "--num-proc", "0"], "argument --num-proc: must be a positive integer, not '0'"),
    # its text trained twice, unsaid
    (["a.txt", "./a.txt"], "a.txt is read twice (as a.txt and as ./a.txt): name each input once"),
    # the message named a.txt twice (a.txt and a.txt), not the folder it was read through
    ([".", "a.txt"], "a.txt is read twice (through the folder . and as a.txt): name each input once"),
], ids=["input", "--val", "in both", "--num-proc 0", "twice", "in its folder"])
def test_command_line_mistakes_name_its_own_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture, args: list[str],
                                                      message: str) -> None:
    """Not train.py's data.path= and data.val_path=, and a path as it was typed; --num-proc 0 is refused rather
    than read as every core."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "a.txt", stories(5, seed=15))
    assert cli(["prepare", *args, "--root", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message.format(a=tmp_path / 'a.txt')}") and err.count("\n") == 1, err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("args, message", [
    (["outer", "outer/b.dataset"], "outer/b.dataset/data-00000-of-00001.arrow is read twice (through the folder "
                                   "outer and through the folder outer/b.dataset): name each input once"),
    (["outer", "--val", "outer/b.dataset"], "{arrow} is in both the inputs and --val: validation text must be "
                                            "held out"),
], ids=["twice", "in both"])
def test_a_saved_dataset_named_again_through_a_folder_above_it_is_refused(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture,
                                                                          args: list[str], message: str) -> None:
    """A saved dataset's folder was compared as itself, not as the *.arrow files it reads, which a folder above it
    reads too: its text trained twice, and as --val it was held out and trained on alike."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "outer" / "b.dataset", stories(5, seed=15))
    capsys.readouterr()  # what saving it printed
    assert cli(["prepare", *args, "--root", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    arrow = tmp_path / "outer" / "b.dataset" / "data-00000-of-00001.arrow"
    assert err.startswith(f"error: {message.format(arrow=arrow)}") and err.count("\n") == 1, err
    assert not (tmp_path / "data").exists()


KILL = """
import os, signal, sys
import gpt.__main__ as cli, gpt.data.prepare as prepare, gpt.data.shards as shards
real, written = getattr({module}, {name!r}), []
def torn(path, data, *rest):
    written.append(path)
    if len(written) == {at}:  # half of this file reaches the disk, then the process dies
        data = data.tobytes() if hasattr(data, "tobytes") else data
        open(path, "wb").write(data[:len(data) // 2]); os.kill(os.getpid(), signal.SIGKILL)
    return real(path, data, *rest)
setattr({module}, {name!r}, torn)
sys.exit(cli.main(["prepare", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("module, name, at", [("shards", "save_shard", 3), ("prepare", "write_file", 1)],
                         ids=["during a shard", "during the manifest"])
def test_sigkill_during_preparation_leaves_nothing_read_and_a_rerun_finishes(tmp_path: Path, module: str,
                                                                              name: str, at: int,
                                                                              capsys: pytest.CaptureFixture) -> None:
    corpus, out = write(tmp_path / "a.txt", stories(80, seed=9)), tmp_path / "prepared"
    args = [str(corpus), "--out", str(out), "--doc-bytes", "256", "--shard-tokens", "500", "--num-proc", "1"]
    killed = subprocess.run([sys.executable, "-c", KILL.format(module=module, name=name, at=at), *args], cwd=ROOT,
                            capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not out.exists() and len(list(tmp_path.glob(".prepared.tmp-*"))) == 1  # torn files, never at `out`
    with pytest.raises(ValueError, match="missing or not a tinygpt manifest"):
        open_prepared(out, "char")
    assert cli(["prepare", *args]) == 0  # the command again, in this process
    assert f"train with: python train.py data=text data.path={out} data.tokenizer=char" in capsys.readouterr().out
    assert not list(tmp_path.glob(".prepared.tmp-*"))  # the dead run's leftovers are gone
    clean = build([corpus], tmp_path / "clean")
    assert shard_bytes(open_prepared(out, "char")) == shard_bytes(clean)


def test_an_input_written_to_while_it_is_prepared_is_refused_not_recorded_as_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A download still being written was prepared from its first part and recorded with its later size and mtime: the
    same command then found that folder done, and trained on part of the text without a word."""
    corpus, out = write(tmp_path / "a.txt", stories(20, seed=12)), tmp_path / "out"
    learn = prepare_module.learn_tokenizer

    def learn_while_written(*args: object) -> object:
        with open(corpus, "a") as f:
            f.write("the rest of the download\n")
        return learn(*args)

    monkeypatch.setattr(prepare_module, "learn_tokenizer", learn_while_written)
    with pytest.raises(ValueError, match=rf"^{corpus} changed while it was being prepared \(a download or copy still "
                                         r"being written\?\): run again once it is complete$"):
        build([corpus], out)
    assert not out.exists()
    monkeypatch.undo()
    assert split_documents(build([corpus], out)) == split_documents(build([corpus], tmp_path / "again"))


def encode_or_die(work: workers.Work, unit: Unit) -> tuple:
    """The encoding of a unit, except that the worker given the third unit dies, as the kernel's OOM killer ends one."""
    if unit.start >= 2 * text_formats.UNIT_BYTES:
        os.kill(os.getpid(), signal.SIGKILL)
    return ENCODE(work, unit)


ENCODE = workers.encode


@pytest.mark.timeout(60)  # a multiprocessing.Pool waited forever for the dead worker's unit, holding the lock
def test_a_worker_killed_during_preparation_is_one_line_and_leaves_nothing(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = write(tmp_path / "a.txt", stories(80, seed=11))
    monkeypatch.setattr(text_formats, "UNIT_BYTES", 1000)
    monkeypatch.setattr(prepare_module, "encode", encode_or_die)
    with pytest.raises(ValueError, match=r"^a process preparing the corpus died \(killed, most likely for memory\): "
                                         r"run again with fewer processes \(data.num_proc, or prepare's --num-proc\)$"):
        build([corpus], tmp_path / "out", num_proc=2)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.tmp-*"))


def test_a_lock_file_that_cannot_be_opened_is_one_line_naming_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """The lock beside a prepared folder made a folder (or made unwritable) by hand: preparing stopped with an
    IsADirectoryError traceback."""
    (tmp_path / "corpus.txt").write_text(play(200))
    (tmp_path / "prep" / ".out.lock").mkdir(parents=True)
    assert cli(["prepare", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "prep/out"), "--num-proc", "1"]) == 2
    assert capsys.readouterr().err == f"error: cannot open the preparation lock {tmp_path / 'prep/.out.lock'}: Is a " \
        "directory; delete it (it holds nothing: the next preparation makes it again)\n"
    assert not (tmp_path / "prep/out").exists()


def test_full_disk_is_one_line_and_leaves_nothing_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = write(tmp_path / "a.txt", stories(80, seed=10))
    real_open = open

    class FullDisk:
        def __init__(self, f: object) -> None:
            self.f = f

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def write(self, data: bytes) -> None:
            self.f.write(data[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    def opened(path: Path, mode: str = "r", *args: object) -> object:
        f = real_open(path, mode, *args)
        return FullDisk(f) if Path(path).name.startswith(".train_00001.bin.") else f  # its temporary file

    monkeypatch.setattr(atomic, "open", opened, raising=False)
    data = lambda: TextData(block_size=8, path=str(corpus), root=str(tmp_path / "data"), doc_bytes=256,  # noqa: E731
                            shard_tokens=500, num_proc=1)
    with pytest.raises(ValueError, match=r"^could not write .*train_00001.bin: No space left on device; free some "
                                         r"disk space \(or set data.root= to another disk\)") as err:
        data().vocab_size
    assert "\n" not in str(err.value)
    assert [p.name for p in (tmp_path / "data" / "shards").iterdir() if not p.name.endswith(".lock")] == []
    monkeypatch.undo()
    again = data()
    assert split_documents(again.corpus) == split_documents(build([corpus], tmp_path / "clean"))


def user_error(tmp_path: Path, case: str) -> tuple[dict, str]:
    """TextData arguments that are each a user mistake about the inputs, and the message's expected pattern."""
    jsonl, parquet, prepared = tmp_path / "bad.jsonl", tmp_path / "body.parquet", tmp_path / "prepared"
    if case == "not json":
        jsonl.write_text('{"text": "fine"}\n{"text": "cut off\n')
        return {"path": str(jsonl)}, rf"^{jsonl}:2 is not JSON \(.*\): fix or delete that line$"
    if case in ("a json array", "json over several lines"):  # once "1 is not JSON: fix or delete that line"
        records = [{"text": "fine"}, {"text": "fine too"}]
        jsonl = tmp_path / "records.json"
        jsonl.write_text(json.dumps(records if case == "a json array" else records[0], indent=2))
        what, query = ("a JSON array", "'.[]'") if case == "a json array" else ("JSON over several lines", ".")
        return {"path": str(jsonl)}, (rf"^{jsonl} is {what}, not JSON Lines \(an object per line\): write each "
                                      rf"record on a line of its own, e.g. jq -c {re.escape(query)} {jsonl} > "
                                      r"<new file>.jsonl$")
    if case in ("a huge number", "deep nesting"):  # JSON, but once a traceback or a message naming no line
        other = "9" * 5000 if case == "a huge number" else "[" * 100_000 + "]" * 100_000
        jsonl.write_text(f'{{"text": "fine"}}\n{{"text": "fine too", "other": {other}}}\n')
        return {"path": str(jsonl)}, rf"^{jsonl}:2 is JSON that Python cannot read \(.*\): fix or delete that line$"
    if case == "compressed":  # read as text: 'not UTF-8', and the iconv that named made it text of garbage
        import gzip

        packed = tmp_path / "bad.jsonl.gz"
        packed.write_bytes(gzip.compress(b'{"text": "fine"}\n'))
        return {"path": str(packed)}, (rf"^data.path={packed} is compressed: decompress it first \(gzip -dk {packed}\) "
                                       rf"and name what that gives \({packed.with_suffix('')}\)$")
    if case in ("latin-1 jsonl", "windows-1252 jsonl"):  # once "iconv -t utf-8", which fails: no -f names the source
        text = "caf\u00e9" if case == "latin-1 jsonl" else "\u201cquoted\u201d"
        raw = json.dumps({"text": text}, ensure_ascii=False).encode("latin-1" if case == "latin-1 jsonl" else "cp1252")
        jsonl.write_bytes(b'{"text": "fine"}\n' + raw + b"\n")
        byte, source = ("0xe9", "latin1") if case == "latin-1 jsonl" else ("0x93", "cp1252")
        return {"path": str(jsonl)}, (rf"^{jsonl}:2 is not UTF-8: byte {byte} at byte offset \d+ \(convert it, e.g. "
                                      rf"iconv -f {source} -t utf-8\)$")
    if case == "utf-16 jsonl":  # once "2 is not UTF-8 (convert the file, e.g. iconv -t utf-8)", which keeps it so
        jsonl.write_bytes('{"text": "fine"}\n{"text": "fine too"}\n'.encode("utf-16"))
        return {"path": str(jsonl)}, rf"^{jsonl} is UTF-16, not UTF-8: convert it \(iconv -f utf-16 -t utf-8\)$"
    if case in ("utf-16", "utf-16 without a byte order mark"):  # Windows' "Unicode", PowerShell 5's > redirection
        text = tmp_path / "notes.txt"
        text.write_bytes(play(20).encode("utf-16" if case == "utf-16" else "utf-16-le"))
        if case == "utf-16":  # once "not UTF-8", naming iconv -f latin1, which made it text with a NUL byte in two
            return {"path": str(text)}, rf"^{text} is UTF-16, not UTF-8: convert it \(iconv -f utf-16 -t utf-8\)$"
        # its ASCII is UTF-8 too, a NUL byte beside each character: once trained on without a word
        return {"path": str(text)}, (rf"^{text} holds a NUL byte at byte offset 1, which text does not: it is UTF-16 "
                                     r"\(convert it: iconv -f utf-16le -t utf-8\) or binary$")
    if case in ("binary", "binary without a NUL byte", "latin-1", "windows-1252"):  # binary was told to iconv it
        raw = random.Random(0).randbytes(20000)
        raw = {"binary": raw, "binary without a NUL byte": raw.replace(b"\x00", b"\x01"),
               "latin-1": play(20).replace("e", "\u00e9").encode("latin-1"),
               # Windows' curly quotes: from latin1 they were invisible control characters, trained as text
               "windows-1252": f"\u201c{play(20)}\u201d".encode("cp1252")}[case]
        (text := tmp_path / "notes.txt").write_bytes(raw)
        if case in ("latin-1", "windows-1252"):  # text in another encoding keeps the advice that converts it
            byte, source = ("0xe9", "latin1") if case == "latin-1" else ("0x93", "cp1252")
            return {"path": str(text)}, (rf"^{text} is not UTF-8: byte {byte} at byte offset \d+ \(convert it, e.g. "
                                         rf"iconv -f {source} -t utf-8\)$")
        return {"path": str(text)}, (rf"^{text} is not text \(binary\?\): \d+% of its bytes from byte offset 0 are "
                                     r"control characters, which text in no encoding holds so many of: give a text "
                                     r"file$")
    if case == "no field":
        jsonl.write_text('{"body": "the text is here"}\n')
        return {"path": str(jsonl)}, rf"^{jsonl}:1 has no text field 'text': set data.text_field=<the key"
    if case in ("a number", "null"):  # the field is there, but holds no string
        jsonl.write_text(f'{{"text": "fine"}}\n{{"text": {123 if case == "a number" else "null"}}}\n')
        return {"path": str(jsonl)}, rf"^{jsonl}:2 field 'text' is {case}, not a string: make it a string, or set data."
    if case == "lone surrogate":  # valid JSON, but no UTF-8 text: once a codec error naming no file or line
        jsonl.write_text('{"text": "fine"}\n{"text": "half \\ud83d a pair"}\n')
        return {"path": str(jsonl)}, (rf"^{jsonl}:2 field 'text' holds \\ud83d, half of a UTF-16 surrogate pair "
                                      r"without its other half \(not a character\): fix or delete that line$")
    if case == "no column":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"body": ["a", "b"], "id": [1, 2]}), parquet)
        return {"path": str(parquet)}, rf"^{parquet} has no column 'text' \(it has body, id\): set data.text_field="
    if case in ("numbers column", "arrow numbers column"):  # once a TypeError from the tokenizer, naming no file
        import pyarrow as pa
        import pyarrow.parquet as pq

        table, path = pa.table({"text": [1, 2], "body": ["a", "b"]}), parquet
        if case == "arrow numbers column":
            path = tmp_path / "body.arrow"
            with pa.ipc.new_stream(str(path), table.schema) as writer:
                writer.write_table(table)
        else:
            pq.write_table(table, path)
        return {"path": str(path)}, rf"^{path} column 'text' holds int64 values, not strings: set data.text_field="
    if case == "not parquet":  # once pyarrow's message alone, naming no file
        parquet.write_text("plain text, misnamed\n")
        return {"path": str(parquet)}, rf"^{parquet} is not a Parquet file \(Parquet magic bytes not found .*\): " \
                                       r"write it again, or rename it"
    if case == "a fraction beside --val":  # the fix named was --val-fraction, which splits no such folder
        held = write(tmp_path / "held.txt", stories(5, seed=12))
        build([write(tmp_path / "a.txt", stories(60, seed=11))], prepared, val_inputs=[str(held)])
        return ({"path": str(prepared), "val_fraction": 0.5},
                rf"^data.val_fraction=0.5 is not what {prepared} was prepared with \(val_fraction=0.1\), and a "
                "prepared folder keeps its own: set data.val_fraction=0.1, or prepare it again with --val-fraction=0.5 "
                r"and without --val \(whose files are validation whatever the fraction\)$")
    build([write(tmp_path / "a.txt", stories(60, seed=11))], prepared)
    if case == "a run folder in the folder":  # its logged samples trained as text, silently
        run = tmp_path / "corpus" / "outputs" / "run"
        (run / ".hydra").mkdir(parents=True)
        (run / "csv" / "version_0").mkdir(parents=True)
        (run / "csv" / "version_0" / "samples.txt").write_text("step 100: what the model wrote\n")
        (tmp_path / "corpus" / "story.txt").write_text(play(20))
        return ({"path": str(tmp_path / "corpus")},
                rf"^data.path={tmp_path / 'corpus'} holds {run}, the folder of a training run \(it has \.hydra/\), "
                r"whose csv/version_0/samples.txt would train as text: name the text's own files or folder$")
    if case in ("a tokenizer folder in the folder", "a tokenizer folder"):  # GPT-2's merges trained as text, silently
        tokenizer = tmp_path / "corpus" / "my-model"
        tokenizer.mkdir(parents=True)
        for name, text in [("merges.txt", "#version: 0.2\nĠ t\n"), ("vocab.json", '{"!": 0}'),
                           ("tokenizer_config.json", '{"tokenizer_class": "GPT2Tokenizer"}')]:
            (tokenizer / name).write_text(text)  # as python -m gpt export writes them for GPT-2's BPE
        (tmp_path / "corpus" / "story.txt").write_text(play(20))
        if case == "a tokenizer folder":
            return ({"path": str(tokenizer)},
                    rf"^data.path={tokenizer} is a Hugging Face tokenizer's folder \(it has vocab.json and "
                    r"merges.txt\), whose merges.txt would train as text: name the text's own files or folder$")
        return ({"path": str(tmp_path / "corpus")},
                rf"^data.path={tmp_path / 'corpus'} holds {tokenizer}, a Hugging Face tokenizer's folder \(it has "
                r"vocab.json and merges.txt\), whose merges.txt would train as text: name the text's own files or "
                "folder$")
    if case == "a prepared folder among inputs":  # was "a folder with no *.txt ... files: add some"
        return ({"path": [str(tmp_path / "a.txt"), str(prepared)]},
                rf"^data.path={prepared} is a corpus prepared already, which trains only as the one data.path: name "
                "it alone there, or name the text it was prepared from$")
    if case == "another setting":  # read as prepared, the run's val_fraction was once ignored without a word
        return ({"path": str(prepared), "val_fraction": 0.5},
                rf"^data.val_fraction=0.5 is not what {prepared} was prepared with \(val_fraction=0.1\), and a "
                "prepared folder keeps its own: set data.val_fraction=0.1, or prepare it again with --val-fraction="
                "0.5$")
    return ({"path": str(prepared), "tokenizer": "gpt2"},
            rf"^{prepared}/manifest.json was prepared with data.tokenizer=char, not gpt2: set data.tokenizer=char, "
            "or prepare it again with --tokenizer=gpt2$")


@pytest.fixture(scope="module")
def table_bytes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A small corpus as a Parquet file and as an Arrow stream file, by suffix."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder, table = tmp_path_factory.mktemp("tables"), pa.table({"text": play(200).splitlines()})
    pq.write_table(table, folder / "corpus.parquet")
    with pa.ipc.new_stream(str(folder / "corpus.arrow"), table.schema) as writer:
        writer.write_table(table)
    return {suffix: (folder / f"corpus{suffix}").read_bytes() for suffix in (".parquet", ".arrow")}


def prepare_with_a_flipped_bit(raw: bytes, suffix: str, at: int, bit: int) -> None:
    """Prepare `raw` with one bit flipped (`at` counted from the end when negative): it is read, or refused in one
    line naming the file. Neither format carries a checksum of its pages, so a flipped bit inside a text is read as
    another text, but one that breaks the file's structure must be named."""
    raw = bytearray(raw)
    raw[at % len(raw)] ^= 1 << bit
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"corpus{suffix}"
        path.write_bytes(bytes(raw))
        argv = ["prepare", str(path), "--tokenizer", "char", "--num-proc", "1", "--root", f"{folder}/data"]
        outcome = call("python -m gpt", lambda: cli(argv))
        assert_clean(outcome, argv)
        assert outcome.code == 0 or outcome.err.splitlines()[-1].startswith(f"error: {path} "), outcome.err


@given(at=st.integers(-4000, 4000), bit=st.integers(0, 7))
@example(at=1933, bit=0)  # in a compressed page: OSError "Corrupt snappy compressed data." and a traceback
@example(at=-266, bit=0)  # in the footer: OSError "Couldn't deserialize thrift"
@example(at=429, bit=7)  # a text byte no longer UTF-8: a codec error naming no file
@settings(max_examples=scaled(40))
def test_a_parquet_file_with_a_flipped_bit_is_read_or_refused_in_one_line(table_bytes: dict[str, bytes], at: int,
                                                                          bit: int) -> None:
    prepare_with_a_flipped_bit(table_bytes[".parquet"], ".parquet", at, bit)


@given(at=st.integers(-7000, 7000), bit=st.integers(0, 7))
@example(at=4188, bit=7)  # a text byte no longer UTF-8: a codec error naming no file
@example(at=510, bit=0)  # a string's offset: read past its text; others crashed the process (a segfault)
@settings(max_examples=scaled(40))
def test_an_arrow_file_with_a_flipped_bit_is_read_or_refused_in_one_line(table_bytes: dict[str, bytes], at: int,
                                                                        bit: int) -> None:
    prepare_with_a_flipped_bit(table_bytes[".arrow"], ".arrow", at, bit)


@pytest.mark.parametrize("case", ["not json", "a json array", "json over several lines", "a huge number",
                                  "deep nesting", "compressed", "no field", "a number", "null", "lone surrogate",
                                  "utf-16", "utf-16 without a byte order mark", "utf-16 jsonl", "binary",
                                  "binary without a NUL byte", "latin-1", "windows-1252", "latin-1 jsonl",
                                  "windows-1252 jsonl", "no column",
                                  "numbers column", "arrow numbers column", "not parquet", "another tokenizer",
                                  "another setting", "a fraction beside --val", "a prepared folder among inputs",
                                  "a run folder in the folder", "a tokenizer folder in the folder",
                                  "a tokenizer folder"])
def test_bad_inputs_are_one_line_naming_the_file_and_the_fix(tmp_path: Path, case: str) -> None:
    kwargs, pattern = user_error(tmp_path, case)
    inputs = files_in(tmp_path)
    with pytest.raises(ValueError, match=pattern) as err:
        TextData(block_size=8, root=str(tmp_path / "data"), num_proc=1, **kwargs).vocab_size
    assert "\n" not in str(err.value)
    assert {k: v for k, v in files_in(tmp_path).items() if not k.startswith("data/")} == inputs
    shards_folder = tmp_path / "data" / "shards"
    assert not shards_folder.exists() or not any(p.is_dir() for p in shards_folder.iterdir())
