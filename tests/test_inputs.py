"""Which files a named file or folder gives: the folder walk, notes on what it leaves out, and its refusals."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gpt.__main__ import main as cli
from gpt.data.corpus import TextData
from gpt.data.inputs import unread_notes
from gpt.data.prepared import open_prepared
from tests.test_prepare import build, split_documents, stories, write


def test_a_folders_hidden_files_and_folders_are_not_read(tmp_path: Path) -> None:
    """JupyterLab keeps a copy of each text file it edits in .ipynb_checkpoints/, and macOS writes ._<name> files of
    its own metadata beside files copied to another disk: read, the copies trained twice (an older copy, hashed apart,
    could hold out in validation what the newer trains) and the metadata failed as binary."""
    docs = stories(30, seed=20)
    folder = tmp_path / "corpus"
    write(folder / "a.txt", docs)
    write(folder / ".ipynb_checkpoints" / "a-checkpoint.txt", [*docs[:25], "an older draft"])
    (folder / "._a.txt").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")
    splits = split_documents(build([folder], tmp_path / "out"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)
    only_hidden = tmp_path / "only-hidden"
    write(only_hidden / ".drafts" / "b.txt", docs)
    with pytest.raises(ValueError, match=r"is a folder with no \*.txt, \*.jsonl, \*.parquet, \*.arrow or \*.feather "
                                         "files"):
        build([only_hidden], tmp_path / "out-hidden")


def test_a_folders_files_of_other_suffixes_are_noted_where_it_is_prepared_and_trained(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A folder reads its *.txt, *.jsonl, *.parquet and *.arrow files: a book.md, or JSON Lines saved as data.json,
    was left out without a word, and the corpus trained on less than its owner thought."""
    docs = stories(30, seed=24)
    folder = tmp_path / "corpus"
    write(folder / "a.txt", docs[:10])
    write(folder / "book.txt", docs[10:20]).rename(folder / "book.md")
    write(folder / "more" / "data.jsonl", docs[20:]).rename(folder / "more" / "data.json")
    assert cli(["prepare", str(folder), "--out", str(tmp_path / "out"), "--num-proc", "1"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"note: {folder} ")]
    assert len(notes) == 1 and all(said in notes[0] for said in ("2 files", "book.md", "more/data.json"))
    splits = split_documents(open_prepared(tmp_path / "out", None))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs[:10])  # the text file is still read
    run = TextData(block_size=4, path=str(folder), root=str(tmp_path / "data"), num_proc=1)
    assert sorted(sum(split_documents(run.corpus).values(), [])) == sorted(docs[:10])
    assert f"data.path={notes[0].removeprefix('note: ')}" in run.notes  # the same note, named as training names it
    # The renames the note names make both files read, and the note goes.
    assert "*.txt" in notes[0] and "*.jsonl" in notes[0]
    (folder / "book.md").rename(folder / "book.txt")
    (folder / "more" / "data.json").rename(folder / "more" / "data.jsonl")
    assert cli(["prepare", str(folder), "--out", str(tmp_path / "renamed"), "--num-proc", "1"]) == 0
    assert f"note: {folder} " not in capsys.readouterr().out
    splits = split_documents(open_prepared(tmp_path / "renamed", None))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)


def test_a_compressed_file_in_a_folder_is_noted_with_the_command_that_decompresses_it(tmp_path: Path) -> None:
    """A corpus.jsonl.gz in a folder was left out without a word, where the same file named alone is refused naming
    the command that decompresses it; once decompressed (the command keeps the compressed file), it reads."""
    import gzip

    docs = stories(20, seed=25)
    folder = tmp_path / "corpus"
    write(folder / "a.txt", docs[:5])
    packed = folder / "b.jsonl.gz"
    packed.write_bytes(gzip.compress(write(tmp_path / "b.jsonl", docs[5:]).read_bytes()))
    [note] = unread_notes([str(folder)], "{}")
    command = re.search(r"\((gzip [^)]*)\)", note)[1]
    subprocess.run(shlex.split(command), check=True)
    assert packed.exists() and unread_notes([str(folder)], "{}") == []
    splits = split_documents(build([folder], tmp_path / "decompressed"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)


@pytest.mark.parametrize("name", ["b.zip", "b.tar.gz", "b.TGZ", "b.tar"])
def test_an_archive_unpacks_beside_it_by_the_command_its_note_and_refusal_name(tmp_path: Path, name: str) -> None:
    """The commands named were unzip <file>, which unpacks into the folder it runs in, and gzip -dk, which leaves a
    *.tar no folder reads: run as given, neither made the text read. Each runs here from another folder. A *.tar
    named alone was refused as binary text, naming no command."""
    import tarfile
    import zipfile

    docs = stories(20, seed=30)
    source = write(tmp_path / "source" / "b.txt", docs[5:])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def packed(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".zip"):
            with zipfile.ZipFile(path, "w") as archive:
                archive.write(source, "b.txt")
        else:
            with tarfile.open(path, "w" if name.endswith(".tar") else "w:gz") as archive:
                archive.add(source, "b.txt")
        return path

    folder = tmp_path / "corpus"
    write(folder / "a.txt", docs[:5])
    packed(folder / name)
    [note] = unread_notes([str(folder)], "{}")
    unpack = re.search(r"(?:decompress a compressed one|unpack an archive) \((.*)\)$", note)[1]
    subprocess.run(unpack, shell=True, check=True, cwd=elsewhere)
    assert unread_notes([str(folder)], "{}") == []
    splits = split_documents(build([folder], tmp_path / "folder-out"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)
    alone = packed(tmp_path / "alone" / name)
    what = "an archive: unpack" if name.endswith(".tar") else "compressed: decompress"
    with pytest.raises(ValueError, match=rf"^data.path={alone} is {what} it first \(") as err:
        build([alone], tmp_path / "refused")
    command, gives = re.search(r" it first \((.*)\) and name what that gives \((.*)\)$",
                               str(err.value)).groups()
    subprocess.run(command, shell=True, check=True, cwd=elsewhere)
    assert list(elsewhere.iterdir()) == []
    splits = split_documents(build([Path(gives)], tmp_path / "alone-out"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs[5:])


@pytest.mark.parametrize("name", ["-notes.tar.gz", "-notes.txt.gz", "-notes.zip", "-notes.tar"])
def test_a_path_starting_with_a_dash_unpacks_by_the_command_named_as_a_path(tmp_path: Path, name: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A file -notes.tar.gz in the folder the user is in was named bare in the command that decompresses it, which
    read it as options (mkdir: invalid option -- 'n'), alone and in a folder's note."""
    import gzip
    import tarfile
    import zipfile

    docs = stories(20, seed=32)
    monkeypatch.chdir(tmp_path)
    source = write(tmp_path / "source" / "b.txt", docs)
    if name.endswith(".zip"):
        with zipfile.ZipFile(name, "w") as archive:
            archive.write(source, "b.txt")
    elif ".tar" in name:
        with tarfile.open(name, "w:gz" if name.endswith(".gz") else "w") as archive:
            archive.add(source, "b.txt")
    else:
        Path(name).write_bytes(gzip.compress(source.read_bytes()))
    with pytest.raises(ValueError, match=rf"^data.path={name} is ") as err:
        build([Path(name)], tmp_path / "refused")
    command, gives = re.search(r" it first \((.*)\) and name what that gives \((.*)\)$", str(err.value)).groups()
    subprocess.run(command, shell=True, check=True)
    splits = split_documents(build([Path(gives)], tmp_path / "alone-out"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)
    folder = Path("-corpus")
    folder.mkdir()
    Path(name).rename(folder / name)
    [note] = unread_notes([str(folder)], "{}")
    subprocess.run(re.search(r"(?:decompress a compressed one|unpack an archive) \((.*)\)$", note)[1], shell=True,
                   check=True)
    assert unread_notes([str(folder)], "{}") == []


def test_a_folder_of_readable_files_and_their_metadata_has_no_note(tmp_path: Path) -> None:
    """The JSON files `datasets` writes beside a table (state.json and dataset_info.json of a saved dataset) describe
    it, and an empty file (a lock) holds no text: a note naming them would be noise on a common layout."""
    docs = stories(30, seed=26)
    folder = tmp_path / "corpus"
    write(folder / "a.txt", docs[:10])
    write(folder / "b.parquet", docs[10:20])
    write(folder / "saved.dataset", docs[20:])
    (folder / "cache.lock").touch()
    assert {p.name for p in (folder / "saved.dataset").iterdir()} >= {"state.json", "dataset_info.json"}
    assert unread_notes([str(folder)], "{}") == []
    splits = split_documents(build([folder], tmp_path / "out"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)


def test_a_folder_with_no_file_it_reads_names_the_files_it_holds(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    write(folder / "notes.txt", stories(5, seed=27)).rename(folder / "notes.text")
    write(folder / "rows.jsonl", stories(5, seed=28)).rename(folder / "rows.json")
    with pytest.raises(ValueError, match=rf"^data.path={folder} is a folder with no \*.txt, \*.jsonl, \*.parquet, "
                                         r"\*.arrow or \*.feather files, only 2 files of other suffixes "
                                         r"\(notes.text, rows.json\): .*\*.txt.*\*.jsonl") as err:
        build([folder], tmp_path / "out")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("suffix", [".csv", ".TSV"])
def test_a_csv_file_is_refused_naming_the_command_that_makes_it_parquet(tmp_path: Path, suffix: str) -> None:
    """Read as text (its suffix is none of the formats'), a CSV file trained its header, ids and labels beside its
    text, and data.text_field, which names the column a user means, was ignored without a word."""
    import csv

    docs = stories(20, seed=19)
    table = tmp_path / f"corpus{suffix}"
    with open(table, "w", newline="") as f:
        writer = csv.writer(f, delimiter="," if suffix == ".csv" else "\t")
        writer.writerows([["id", "text", "label"], *([i, doc, "x,y"] for i, doc in enumerate(docs))])
    with pytest.raises(ValueError, match=rf"^data.path={table} is {suffix[1:].upper()}, which would train as text, its "
                                         r"header and every column included: convert it to Parquet \(") as err:
        build([table], tmp_path / "out")
    assert "\n" not in str(err.value) and str(err.value).endswith(", or rename it *.txt to train on it as text")
    command = re.search(r"\((python -c .*)\), then name", str(err.value))[1]
    subprocess.run([sys.executable, *shlex.split(command)[1:]], check=True)  # the command it names makes the Parquet
    splits = split_documents(build([table.with_suffix(".parquet")], tmp_path / "parquet"))
    assert sorted(splits["train"] + splits["val"]) == sorted(docs)


def test_a_csv_file_in_a_folder_is_refused_as_one_named_alone(tmp_path: Path) -> None:
    """A folder reads its *.txt, *.jsonl, *.parquet and *.arrow files: its CSV files were left out without a word, the
    corpus trained on the text files alone, where the same CSV named alone is refused with how to convert it."""
    folder = tmp_path / "corpus"
    write(folder / "notes.txt", stories(5, seed=23))
    (folder / "more").mkdir()
    (folder / "more" / "table.csv").write_text("id,text\n0,a story\n")
    with pytest.raises(ValueError, match=rf"^data.path={folder} holds more/table.csv, a CSV file, which a folder does "
                                         r"not read: convert it to Parquet \(python -c .*\) or move it out of the "
                                         r"folder$"):
        build([folder], tmp_path / "out")


def test_a_folder_of_a_datasets_splits_is_refused_naming_the_train_split(tmp_path: Path) -> None:
    """A DatasetDict saved with save_to_disk, or the datasets cache of a loaded one, named as a folder (or a folder
    above it) once read every split's *.arrow: the test split was trained on without a word."""
    train_docs, test_docs = stories(30, seed=31), [d + " ~ held out" for d in stories(10, seed=32)]
    saved = tmp_path / "parent" / "saved"
    saved.mkdir(parents=True)
    (saved / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    for split, docs in (("train", train_docs), ("test", test_docs)):
        write(saved / split / "data-00000-of-00001.arrow", docs)
        # As Dataset.from_dict saves it: no _split
        state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_fingerprint": split,
                 "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
                 "_split": None}
        (saved / split / "state.json").write_text(json.dumps(state))
        (saved / split / "dataset_info.json").write_text("{}")
    cache = tmp_path / "cache" / "text" / "default" / "0.0.0" / "abc"
    write(cache / "text-train-00000-of-00002.arrow", train_docs[:15])
    write(cache / "text-train-00001-of-00002.arrow", train_docs[15:])
    write(cache / "text-test.arrow", test_docs)
    (cache / "dataset_info.json").write_text(json.dumps({"splits": {"train": {}, "test": {}}}))
    for path, named in ((saved.parent, f"data.path={saved / 'train'}"), (saved, f"data.path={saved / 'train'}"),
                        (tmp_path / "cache", f"its 2 files {cache}/text-train-*.arrow")):
        with pytest.raises(ValueError, match=rf"^data.path={path} holds the splits test, train of a Hugging Face "
                                             rf"dataset.*name the train split alone \({re.escape(named)}\)$"):
            build([path], tmp_path / "out")
    for train in ([saved / "train"], sorted(cache.glob("*-train-*.arrow"))):
        splits = split_documents(build(train, tmp_path / f"out-{len(train)}"))
        assert sorted(splits["train"] + splits["val"]) == sorted(train_docs)
