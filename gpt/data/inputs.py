"""Which files the inputs give: a file named alone, or a folder's files of a suffix a format reads (hidden ones
aside), with a note on those it leaves out, and the refusals of inputs that would train on the wrong text (a
compressed or CSV file, a run's or a tokenizer's folder, several splits of one dataset, a file read twice)."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from gpt.data.formats import SUFFIXES
from gpt.data.table_formats import read_files
from gpt.overrides import path_argument

# A compressed file read as text is "not UTF-8", and iconv, the fix that names, would make it text of garbage; a
# plain *.tar, its headers between its files, is refused as binary. Each command decompresses beside the file, where
# its folder's walk reads what it gives (unzip and tar would write into the folder they run in), keeping it: one file
# gives its name less the suffix, as gzip -dk does, and an archive a folder of that name, so that its files overwrite
# none beside it. Longest first: a *.tar.gz is an archive, not one file.
COMPRESSED = {".tar.gz": "mkdir -p {copy} && tar -xzf {file} -C {copy}",
              ".tgz": "mkdir -p {copy} && tar -xzf {file} -C {copy}",
              ".tar.bz2": "mkdir -p {copy} && tar -xjf {file} -C {copy}",
              ".tar.xz": "mkdir -p {copy} && tar -xJf {file} -C {copy}",
              ".tar": "mkdir -p {copy} && tar -xf {file} -C {copy}",
              ".gz": "gzip -dk {file}", ".bz2": "bzip2 -dk {file}", ".xz": "xz -dk {file}", ".zst": "zstd -d {file}",
              ".zip": "unzip {file} -d {copy}"}
# A table of delimited columns read as text trains its header, ids and labels beside the text column it holds.
DELIMITED = {".csv": ",", ".tsv": "\t"}
# What `datasets` writes beside each table it saves (save_to_disk) or caches, describing it: no corpus's text, and a
# note naming them would follow every saved dataset or cache folder, so a folder leaves them out unsaid.
DATASET_METADATA = {"state.json", "dataset_info.json", "dataset_dict.json"}
SHOWN = 3  # the files a note names before "and N more": enough to see which kind is left out


def to_parquet(path: Path, delimiter: str) -> str:
    """A command that writes the delimited table `path` as Parquet beside it, its header row naming the columns."""
    options = "" if delimiter == "," else f", parse_options=c.ParseOptions(delimiter={json.dumps(delimiter)})"
    code = (f"import pyarrow.csv as c, pyarrow.parquet as p; p.write_table(c.read_csv({json.dumps(str(path))}"
            f"{options}), {json.dumps(str(path.with_suffix('.parquet')))})")
    return f"python -c {shlex.quote(code)}"


CACHE_SHARD = re.compile(r"-\d{5}-of-\d{5}$")  # how the datasets cache numbers the files of a split


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # not the datasets' file it is named as: no split is known
        return None


def split_of(file: Path) -> str | None:
    """The split of a Hugging Face dataset an *.arrow file holds, where its folders say: a saved DatasetDict's
    dataset_dict.json lists its splits' folders, a saved split's state.json may name it, and the dataset_info.json
    beside the datasets cache's <builder>-<split>[-<shard>-of-<shards>].arrow files lists their splits."""
    if file.suffix.lower() != ".arrow":
        return None
    if (state := _json(file.parent / "state.json")) is not None:
        saved = _json(file.parent.parent / "dataset_dict.json")  # a split saved from Dataset.from_dict has no _split
        if isinstance(saved, dict) and file.parent.name in (saved.get("splits") or []):
            return file.parent.name
        return state.get("_split") if isinstance(state, dict) else None
    info = _json(file.parent / "dataset_info.json")
    splits = info.get("splits") if isinstance(info, dict) else None
    stem = CACHE_SHARD.sub("", file.stem)
    return next((split for split in splits if stem.endswith(f"-{split}")), None) if isinstance(splits, dict) else None


def _one_split(folder: Path, found: list[Path], named: str) -> None:
    """Refuse a folder whose files hold several splits of one Hugging Face dataset (a DatasetDict saved with
    save_to_disk, a datasets cache folder): read together, its test text would be trained on."""
    splits: dict[str, list[Path]] = {}
    for file in found:
        if (split := split_of(file)) is not None:
            splits.setdefault(split, []).append(file)
    if len(splits) < 2:
        return
    split = "train" if "train" in splits else sorted(splits)[0]
    files = [file for file in splits[split] if file.parent == splits[split][0].parent]  # of one dataset
    if (files[0].parent / "state.json").exists():  # a saved split is its folder
        one = named.format(files[0].parent)
    elif len(files) == 1:
        one = named.format(files[0])
    else:
        one = f"its {len(files)} files {files[0].parent}/{CACHE_SHARD.sub('', files[0].stem)}-*.arrow"
    raise ValueError(f"{named.format(folder)} holds the splits {', '.join(sorted(splits))} of a Hugging Face dataset, "
                     f"which would all train, held-out text included: name the {split} split alone ({one})")


def _not_text(member: Path) -> str | None:
    """What the folder of `member` is where `member` shows that its files are not text to train on: a training
    run's (Hydra keeps its .hydra/ there), or a Hugging Face tokenizer's (python -m gpt export, save_pretrained)."""
    if member.name == ".hydra" and member.is_dir():
        return "the folder of a training run (it has .hydra/)"
    if member.name in ("tokenizer.json", "tokenizer_config.json") and member.is_file():
        return f"a Hugging Face tokenizer's folder (it has {member.name})"
    if member.name == "merges.txt" and (member.parent / "vocab.json").is_file():
        return "a Hugging Face tokenizer's folder (it has vocab.json and merges.txt)"
    return None


def _no_run_or_tokenizer_folder(folder: Path, members: list[Path], found: list[Path], named: str) -> None:
    """Refuse a folder whose files include a training run's or a Hugging Face tokenizer's."""
    others: dict[Path, str] = {}
    for member in sorted(members):  # one reason per folder, the same whatever order the file system lists them in
        if what := _not_text(member):
            others.setdefault(member.parent, what)
    for file in found:
        # Such as the csv logger's samples.txt (what the model wrote) or GPT-2's merges.txt (its BPE merges, one
        # pair a line): either would train as text, unsaid.
        if other := next((parent for parent in file.parents if parent in others), None):
            where = "is" if other == folder else f"holds {other},"
            raise ValueError(f"{named.format(folder)} {where} {others[other]}, whose {file.relative_to(other)} would "
                             "train as text: name the text's own files or folder")


def hidden(file: Path, folder: Path) -> bool:
    """Whether `file` is hidden under `folder` (a name starting with a dot on the way): another tool's copy or record,
    such as JupyterLab's .ipynb_checkpoints/<name>-checkpoint.txt or the ._<name> metadata macOS writes beside a file,
    not text of the corpus."""
    return any(part.startswith(".") for part in file.relative_to(folder).parts)


def _walked(path: Path) -> bool:
    """Whether `path` is a folder whose files are walked: not a saved dataset (read whole) or a prepared corpus."""
    return path.is_dir() and not (path / "state.json").exists() and not (path / "manifest.json").is_file()


def _decompressing(path: Path) -> tuple[str, Path] | None:
    """The command that decompresses `path` beside it, and the file or folder it gives, where the end of its name,
    whatever its case, says it is compressed."""
    name = path.name.lower()
    if (end := next((end for end in COMPRESSED if name.endswith(end) and name != end), None)) is None:
        return None
    copy = path.with_name(path.name[:-len(end)])
    return COMPRESSED[end].format(file=path_argument(path), copy=path_argument(copy)), copy


def _archive(path: Path) -> bool:
    """Whether `path` is a *.tar, whatever its case: packed, not compressed, so its messages say to unpack it."""
    return path.name.lower().endswith(".tar")


def _unread(listed: list[Path]) -> list[Path]:
    """The files of a folder's walk, `listed`, that it does not read for their suffix, but for those whose text is
    read or holds nothing: `datasets`' metadata, an empty file (a lock), and a compressed file beside its
    decompressed copy (which the command it is named with keeps)."""
    return [p for p in listed if p.suffix.lower() not in SUFFIXES and p.name not in DATASET_METADATA
            and p.stat().st_size and not ((unpacking := _decompressing(p)) and unpacking[1].exists())]


def _either(options: list[str]) -> str:
    """`options` as a sentence offers them: "a, b or c"."""
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"


GIVEN = _either([f"*{suffix}" for suffix in SUFFIXES])  # the files a folder gives, as its messages name them


def _unread_named(folder: Path, unread: list[Path]) -> str:
    """How many files `unread` holds, and the first few, relative to `folder`."""
    shown = ", ".join(str(p.relative_to(folder)) for p in unread[:SHOWN])
    more = f" and {len(unread) - SHOWN:,} more" if len(unread) > SHOWN else ""
    return f"{len(unread):,} file{'s' * (len(unread) != 1)} of other suffixes ({shown}{more})"


def _unread_fixes(unread: list[Path]) -> list[str]:
    """What makes each kind of file in `unread` read: a suffix of a format, or decompressing (unpacking) it first."""
    unpacking = [(p, command) for p in unread if (command := _decompressing(p))]
    json_lines = [p for p in unread if p.suffix.lower() == ".json"]
    fixes = ["rename a text file *.txt"] if len(unread) > len(unpacking) + len(json_lines) else []
    if json_lines:  # named alone it reads as JSON Lines; a folder reads only *.jsonl as such
        fixes.append("a *.json of JSON Lines *.jsonl")
    if unpacking:
        file, (command, _) = unpacking[0]
        fixes.append(f"{'unpack an archive' if _archive(file) else 'decompress a compressed one'} ({command})")
    return fixes


def unread_notes(paths: list[str], named: str) -> list[str]:
    """A note for each folder among `paths` whose walk leaves out files that are not hidden: a corpus kept as *.md,
    *.text or *.json.gz would otherwise train on less than its owner thinks, without a word."""
    notes = []
    for name in paths:
        if not _walked(folder := Path(name)):
            continue
        if unread := _unread(sorted(p for p in folder.rglob("*") if p.is_file() and not hidden(p, folder))):
            notes.append(f"{named.format(folder)} leaves out {_unread_named(folder, unread)}: a folder reads its "
                         f"{GIVEN} files alone; to train on one, "
                         f"{_either(_unread_fixes(unread))}")
    return notes


def input_files(paths: list[str], named: str) -> list[Path]:
    """The inputs in a fixed order: each file, a saved dataset's folder, or every file of a known suffix under a
    folder, hidden ones aside (so a `datasets` cache folder gives its *.arrow files; one holding several splits is
    refused). `named` is how a message names a path, as the user gave it: `data.path={}` to train.py, `{}` to the
    prepare command."""
    files: list[tuple[Path, int]] = []  # each file, and which input gave it
    for given, name in enumerate(paths):
        path = Path(name)
        if not path.exists():
            raise ValueError(f"{named.format(path)} does not exist: point it at a text, JSONL or Parquet file, or a "
                             "folder")
        if (path / "manifest.json").is_file():  # its shards are no text: the folder is read alone, as data.path
            raise ValueError(f"{named.format(path)} is a corpus prepared already, which trains only as the one "
                             "data.path: name it alone there, or name the text it was prepared from")
        if (unpacking := _decompressing(path)) and path.is_file():
            what = "an archive: unpack" if _archive(path) else "compressed: decompress"
            raise ValueError(f"{named.format(path)} is {what} it first ({unpacking[0]}) and name what that gives "
                             f"({unpacking[1]})")
        if (delimiter := DELIMITED.get(path.suffix.lower())) and path.is_file():
            command = to_parquet(path, delimiter)
            raise ValueError(f"{named.format(path)} is {path.suffix[1:].upper()}, which would train as text, its "
                             f"header and every column included: convert it to Parquet ({command}), then name that "
                             "file and set data.text_field=<its text column>, or rename it *.txt to train on it as "
                             "text")
        if _walked(path):
            members = list(path.rglob("*"))
            listed = sorted(p for p in members if p.is_file() and not hidden(p, path))
            found = [p for p in listed if p.suffix.lower() in SUFFIXES]
            tables = [p for p in listed if p.suffix.lower() in DELIMITED]
            _no_run_or_tokenizer_folder(path, members, found + tables, named)  # a run's CSV logs: named as the run's
            if tables:  # refused named alone, with how to convert it; left out of its folder, it went unsaid
                raise ValueError(f"{named.format(path)} holds {tables[0].relative_to(path)}, a "
                                 f"{tables[0].suffix[1:].upper()} file, which a folder does not read: convert it to "
                                 f"Parquet ({to_parquet(tables[0], DELIMITED[tables[0].suffix.lower()])}) or move it "
                                 "out of the folder")
            if not found:
                unread = _unread(listed)
                holds = f", only {_unread_named(path, unread)}" if unread else ""
                fixes = _unread_fixes(unread) or ["add some"]
                raise ValueError(f"{named.format(path)} is a folder with no "
                                 f"{GIVEN} files{holds}: "
                                 f"{_either([*fixes, 'point at a file'])}")
            _one_split(path, found, named)
            files.extend((file, given) for file in found)
        else:
            files.append((path, given))

    def how(given: int) -> str:
        return f"{'through the folder' if Path(paths[given]).is_dir() else 'as'} {named.format(paths[given])}"

    seen: dict[Path, int] = {}
    for file, given in files:  # named twice, or a folder beside a file in it: its text would train twice, unsaid
        for member in read_files(file):
            if (first := seen.setdefault(member, given)) != given:
                shown = member.relative_to(Path.cwd()) if member.is_relative_to(Path.cwd()) else member
                raise ValueError(f"{shown} is read twice ({how(first)} and {how(given)}): name each input once")
    return [file for file, _ in files]
