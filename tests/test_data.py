"""Text corpora through TextData: windows, reuse of prepared shards, download checks, and every user error."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

import generate
import gpt
from gpt.__main__ import main as cli
from gpt.data.corpus import TextData
import gpt.data.download as corpora
import gpt.data.prepare as prepare
from gpt.data.recipe import Recipe
from gpt.data.shards import ShardWriter, TokenShards, token_dtype
from gpt.data.tokenizers.base import EOT
from gpt.inference.checkpoint import load_checkpoint, save_model
from tests.conftest import ROOT, files_in, play
from tests.fuzzing import job
import train


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "play.txt"
    path.write_text(play())
    return path


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts real preparations (the shards were not there yet)."""
    calls: list[str] = []
    real = prepare.build

    def counted(recipe: Recipe, *args: object, **kwargs: object) -> dict:
        calls.append(recipe.tokenizer)
        return real(recipe, *args, **kwargs)

    monkeypatch.setattr(prepare, "build", counted)
    return calls


def load(path: Path, root: Path, **kwargs: object) -> TextData:
    kwargs = {"block_size": 8, "doc_bytes": 256, "num_proc": 1, **kwargs}
    data = TextData(path=str(path), root=str(root), **kwargs)
    data.corpus  # loads on first use
    return data


def decoded(data: TextData) -> str:
    """Both splits decoded, training first."""
    return "".join(data.tokenizer.decode(split.to_array().tolist()) for split in (data.corpus.train, data.corpus.val))


@pytest.mark.parametrize("tokenizer", ["char", "word", "gpt2", "bpe"])
def test_windows_are_next_token_pairs_from_their_split(text_file: Path, tmp_path: Path, tokenizer: str) -> None:
    data = load(text_file, tmp_path, tokenizer=tokenizer, batch_size=4, val_windows=10, vocab_size=300)
    data.setup()
    train = data.corpus.train.to_array().astype(np.int64).tolist()
    inputs, targets = next(iter(data.train_dataloader()))
    assert inputs.shape == targets.shape == (4, 8)
    torch.testing.assert_close(inputs[:, 1:], targets[:, :-1])
    for row, target in zip(inputs.tolist(), targets.tolist()):
        start = next(i for i in range(len(train)) if train[i:i + 9] == row + target[-1:])
        assert start + 9 <= len(train)
    again = load(text_file, tmp_path, tokenizer=tokenizer, batch_size=4, val_windows=10, vocab_size=300)
    again.setup()
    torch.testing.assert_close(next(iter(again.train_dataloader())), (inputs, targets))  # seeded
    torch.testing.assert_close(again.val_set, data.val_set)  # the validation windows are fixed
    assert data.max_tokens == 8 and "one_example_per_line" not in data.meta


def test_shards_are_reused_and_invalidated_by_text_or_tokenizer(text_file: Path, tmp_path: Path,
                                                               builds: list[str]) -> None:
    first = load(text_file, tmp_path)
    second = load(text_file, tmp_path)
    assert builds == ["char"]
    np.testing.assert_array_equal(second.corpus.train.to_array(), first.corpus.train.to_array())
    assert second.tokenizer.to_dict() == first.tokenizer.to_dict()
    load(text_file, tmp_path, tokenizer="word")
    text_file.write_text(play(seed=1))
    changed = load(text_file, tmp_path)
    assert builds == ["char", "word", "char"]
    assert sorted(decoded(changed).replace(EOT, "").splitlines()) == sorted(play(seed=1).splitlines())


def damage(folder: Path, case: str) -> tuple[Path, str]:
    """Damage a prepared corpus as a disk, a copy or a hand might: the file changed and what its refusal says
    before the fix."""
    shard, manifest = folder / "train_00000.bin", folder / "manifest.json"
    if case == "flipped bit":
        raw = bytearray(shard.read_bytes())
        raw[10] ^= 1  # the size unchanged
        shard.write_bytes(bytes(raw))
        return shard, rf"^shard {shard} does not match the checksum in its manifest"
    if case == "cut short":
        shard.write_bytes(shard.read_bytes()[:-2])
        return shard, rf"^shard {shard} is missing or not the size its manifest records"
    edited = json.loads(manifest.read_text())
    if case == "manifest edited":  # a count that no longer matches its shard, in valid JSON
        edited["splits"]["train"][0]["tokens"] += 1
        manifest.write_text(json.dumps(edited))
        return manifest, rf"^{manifest} was changed after preparation wrote it \(it does not match its sha256\)"
    if case == "manifest of another shape":
        manifest.write_text(json.dumps(list(edited)))
        return manifest, rf"^{manifest} is from another version of tinygpt's shard format"
    manifest.write_text(manifest.read_text()[:-40])
    return manifest, rf"^{manifest} is missing or not a tinygpt manifest"


@pytest.mark.parametrize("made_by", ["a run", "prepare --out"])
@pytest.mark.parametrize("case", ["flipped bit", "cut short", "manifest edited", "manifest of another shape",
                                  "manifest cut short"])
def test_a_damaged_corpus_is_refused_naming_the_file_and_the_fix(text_file: Path, tmp_path: Path, case: str,
                                                                 made_by: str) -> None:
    """Each once read as ids, or (an edited manifest) a KeyError, TypeError or AttributeError; nothing is changed.
    The fix depends on who made the folder (a run remakes its cache; a folder named with --out is the user's to
    remake, and preparation never overwrites it), and following it trains again."""
    if made_by == "a run":
        folder = load(text_file, tmp_path).corpus.folder
        fix = rf"delete {folder} and run again to prepare the corpus afresh$"
        remade = lambda: None  # noqa: E731
        again = lambda: load(text_file, tmp_path)  # noqa: E731
    else:
        folder = tmp_path / "prepared"
        remade = lambda: cli(["prepare", str(text_file), "--out", str(folder), "--doc-bytes", "256",  # noqa: E731
                              "--num-proc", "1"])
        assert remade() == 0
        fix = rf"delete {folder} and prepare it again \(python -m gpt prepare <inputs> --out {folder}\)$"
        again = lambda: load(folder, tmp_path)  # noqa: E731
    path, message = damage(folder, case)
    before = files_in(tmp_path)
    with pytest.raises(ValueError, match=f"{message}: {fix}") as err:
        again()
    assert "\n" not in str(err.value) and files_in(tmp_path) == before
    shutil.rmtree(folder)  # the fix, as the message says
    assert remade() in (None, 0) and len(again().corpus.train) > 0


def test_a_cache_folder_without_its_manifest_names_the_fix_of_a_run(text_file: Path, tmp_path: Path) -> None:
    """A run's cache whose manifest.json was deleted: the line said to choose another --out, a flag train.py lacks."""
    folder = load(text_file, tmp_path).corpus.folder
    (folder / "manifest.json").unlink()
    with pytest.raises(ValueError, match=rf"^{folder} exists and is not a prepared corpus \(no manifest.json\): "
                                         rf"delete {folder} and run again to prepare the corpus afresh$"):
        load(text_file, tmp_path)
    shutil.rmtree(folder)  # the fix, as the message says
    assert len(load(text_file, tmp_path).corpus.train) > 0


@pytest.mark.parametrize("split", ["train", "val"])
def test_an_id_past_the_vocabulary_in_a_shard_whose_mtime_was_kept_is_named_at_the_first_batch(
        text_file: Path, tmp_path: Path, split: str) -> None:
    """A changed shard whose mtime was kept skips the checksum; an id past the vocabulary in it then ended training
    with an IndexError traceback from the embedding. The batch that reads it now names the shard and the fix."""
    folder = load(text_file, tmp_path).corpus.folder
    shard = folder / f"{split}_00000.bin"
    stat, raw = shard.stat(), np.fromfile(shard, np.uint16)
    raw[:] = 40000  # every window holds it, whichever the seed draws
    raw.tofile(shard)
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    data = load(text_file, tmp_path, batch_size=4, val_windows=4)
    message = (rf"^shard {shard} holds id 40000 at token [\d,]+, past the vocabulary of {data.vocab_size} its "
               rf"manifest's tokenizer has: it was changed after preparation; delete {folder} and run again")
    with pytest.raises(ValueError, match=message):
        data.setup()  # the fixed validation windows are read here
        next(iter(data.train_dataloader()))
    with pytest.raises(ValueError, match=message):
        getattr(data.corpus, split).to_array()  # what evaluation and the length callback read


@pytest.mark.parametrize("vocab_size", [2**16, 2**16 + 1, 2**20])
def test_every_id_of_a_vocabulary_comes_back_from_its_shards(tmp_path: Path, vocab_size: int) -> None:
    """Shards are uint16 while every id fits: the last id of a vocabulary of 2**16 + 1 (65,536) would come back as 0."""
    ids = np.array([0, 1, vocab_size // 2, vocab_size - 1], dtype=np.int64)
    dtype = token_dtype(vocab_size)
    writer = ShardWriter(tmp_path, "train", shard_tokens=3, dtype=dtype)
    writer.write(ids)
    paths = [tmp_path / entry["file"] for entry in writer.close()]
    assert TokenShards.open(paths, str(dtype), vocab_size).to_array().tolist() == ids.tolist()
    assert dtype.itemsize == (2 if vocab_size <= 2**16 else 4)  # no wider than the ids need


def test_a_split_of_block_size_plus_one_tokens_is_enough_and_one_token_fewer_is_refused(tmp_path: Path) -> None:
    """A window is block_size + 1 tokens (inputs and the targets one token on): 22 tokens of validation text hold one
    at block_size=21 and none at 22."""
    (tmp_path / "train.txt").write_text(play(lines=12))
    (tmp_path / "val.txt").write_text("a held-out line.\nmore")  # 22 char tokens
    settings = {"val_path": str(tmp_path / "val.txt")}
    assert len(load(tmp_path / "train.txt", tmp_path / "data", block_size=21, **settings).corpus.val) == 22
    with pytest.raises(ValueError, match=r"has 22 char tokens, fewer than model.block_size\+1=23"):
        load(tmp_path / "train.txt", tmp_path / "data", block_size=22, **settings)


def test_an_id_past_the_vocabulary_is_named_at_its_place_in_its_shard() -> None:
    tokens = np.arange(100, dtype=np.uint16) % 10
    tokens[57] = 10
    shards = TokenShards([tokens[:40], tokens[40:]], vocab_size=10, fix="prepare it again")
    assert shards.rows(np.array([0, 30]), 20).max() == 9  # windows that miss it read as ever
    with pytest.raises(ValueError, match=r"^shard 1 holds id 10 at token 17, past the vocabulary of 10 .*; prepare "
                                         r"it again$"):
        shards.rows(np.array([0, 50]), 20)


def test_more_shards_than_a_process_may_open_are_refused_in_one_line(tmp_path: Path) -> None:
    """Every shard is mapped at once, each map holding a file descriptor: a small data.shard_tokens on a corpus of
    many tokens ended the run in a traceback of OSError: Too many open files."""
    import resource

    paths = [tmp_path / f"train_{i:05d}.bin" for i in range(64)]
    for path in paths:
        np.zeros(2, np.uint16).tofile(path)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
    try:
        too_many = (rf"^{tmp_path}: its 64 shards are more files than a process may open at once \(Too many open "
                    r"files\): prepare the corpus again with a larger data.shard_tokens \(--shard-tokens\), or raise "
                    r"that limit \(ulimit -n\)$")
        with pytest.raises(ValueError, match=too_many):
            TokenShards.open(paths, "uint16")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_gpt2_vocabulary_is_compacted_on_a_small_corpus_unless_turned_off(text_file: Path, tmp_path: Path) -> None:
    full = load(text_file, tmp_path, tokenizer="gpt2", compact_vocab=False)
    assert full.vocab_size == 50257
    ids = np.concatenate([full.corpus.train.to_array(), full.corpus.val.to_array()]).tolist()
    compact = load(text_file, tmp_path, tokenizer="gpt2")
    assert compact.tokenizer.vocab == sorted(set(ids)) and compact.vocab_size < 100  # EOT (50256) among them
    assert decoded(compact) == decoded(full) and decoded(full).count(EOT) == 1
    assert sorted(decoded(full).replace(EOT, "").splitlines()) == sorted(text_file.read_text().splitlines())


def test_large_vocabulary_is_stored_as_uint32(tmp_path: Path) -> None:
    path = tmp_path / "many.txt"
    path.write_text("".join(f"w{i} w{i + 1}\n" for i in range(0, 70_000, 2)))
    data = load(path, tmp_path, tokenizer="word", doc_bytes=4096)
    assert data.vocab_size > 2**16 and data.corpus.train.arrays[0].dtype == np.uint32
    assert data.corpus.manifest["dtype"] == "uint32"
    assert sorted(decoded(data).replace(EOT, "").splitlines()) == sorted(path.read_text().splitlines())


def test_download_keeps_verified_bytes_only(tmp_path: Path) -> None:
    source = tmp_path / "remote" / "input.txt"
    source.parent.mkdir()
    source.write_text(play())
    good = hashlib.sha256(source.read_bytes()).hexdigest()
    target = tmp_path / "data" / "shakespeare" / "input.txt"
    with pytest.raises(ValueError, match=r"^checksum mismatch for file://.*nothing was saved"):
        corpora.download(source.as_uri(), target, "0" * 64)
    assert not target.parent.exists() or not any(target.parent.iterdir())
    assert corpora.download(source.as_uri(), target, good).read_text() == play()
    source.unlink()  # from now on only the saved copy exists
    data = TextData(block_size=8, url=source.as_uri(), sha256=good, name="shakespeare", root=str(tmp_path / "data"))
    assert data.sources == [str(target.resolve())]  # the saved copy is used


def test_a_download_changed_on_disk_since_is_refused(tmp_path: Path) -> None:
    """data/shakespeare/input.txt edited or cut short after its download was prepared and trained on as Shakespeare,
    its run and model.pt saying so."""
    source = tmp_path / "remote" / "input.txt"
    source.parent.mkdir()
    source.write_text(play())
    good = hashlib.sha256(source.read_bytes()).hexdigest()
    target = corpora.download(source.as_uri(), tmp_path / "data" / "shakespeare" / "input.txt", good)
    target.write_text(play()[:100])
    data = TextData(block_size=8, url=source.as_uri(), sha256=good, name="shakespeare", root=str(tmp_path / "data"))
    with pytest.raises(ValueError, match=rf"^{target} does not match the sha256 of {source.as_uri()}: it changed "
                                         r"after it was downloaded; delete it to download it again$"):
        data.sources
    target.unlink()
    assert data.sources == [str(target.resolve())] and target.read_text() == play()


def test_offline_download_says_to_pass_a_local_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(corpora.urllib.request, "urlopen", offline)
    with pytest.raises(ValueError, match=r"offline\? pass data.path="):
        TextData(block_size=8, url="https://example.invalid/input.txt", sha256="0" * 64, root=str(tmp_path)).sources


def user_error(tmp_path: Path, case: str) -> tuple[dict, str]:
    """TextData arguments that are each a user mistake, and the message's expected pattern."""
    folder, latin1 = tmp_path / "empty", tmp_path / "latin1.txt"
    folder.mkdir()
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "a.txt").write_text("")
    latin1.write_bytes("caf\u00e9 ok\n".encode() + "na\u00efve\n".encode("latin-1"))
    short = tmp_path / "short.txt"
    short.write_text(play(lines=12))
    (tmp_path / "val.txt").write_text("a held-out line.\nmore")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "tokenizer.json").write_text('{"version": "1.0", "model": ')  # cut short
    return {
        "missing": ({"path": str(tmp_path / "nope.txt")}, r"nope.txt does not exist"),
        "no txt in folder": ({"path": str(folder)},
                             r"folder with no \*.txt, \*.jsonl, \*.parquet, \*.arrow or \*.feather files"),
        "no text": ({"path": str(tmp_path / "blank")}, r"no text in .*blank: the corpus is empty"),
        "not utf-8": ({"path": str(latin1)}, r"latin1.txt is not UTF-8: byte 0xef at byte offset 11 "),
        "val too short": ({"path": str(short), "block_size": 64},
                          r"validation split .* fewer than model.block_size\+1=65"),
        "train too short": ({"path": str(short), "block_size": 64, "val_fraction": 0.99},
                            r"training split .* fewer than model.block_size\+1=65"),
        # Once named data.path's file and advised data.doc_bytes or data.val_fraction, which split no named text.
        "val file too short": ({"path": str(short), "val_path": str(tmp_path / "val.txt"), "block_size": 64},
                               rf"^the validation split of {tmp_path}/val.txt has 22 char tokens, fewer than "
                               r"model.block_size\+1=65: use more text, or a smaller model.block_size$"),
        "bad fraction": ({"path": str(short), "val_fraction": 1.0},
                         r"data.val_fraction=1.0 must be a number in \(0, 1\)"),
        "no path": ({}, r"data=text needs data.path="),
        "tokenizer": ({"path": str(short), "tokenizer": "unigram"}, r"data.tokenizer=unigram is unknown"),
        "bpe too small": ({"path": str(short), "tokenizer": "bpe", "vocab_size": 200},
                          r"data.vocab_size=200 is too small for a byte-level BPE"),
        "tokenizer.json": ({"path": str(short), "tokenizer": str(tmp_path / "hf")},
                           r"hf/tokenizer.json: not a tokenizer.json the tokenizers library can read \(EOF while "),
    }[case]


@pytest.mark.parametrize("case", ["missing", "no txt in folder", "no text", "not utf-8", "val too short",
                                  "train too short", "val file too short", "bad fraction", "no path", "tokenizer",
                                  "bpe too small", "tokenizer.json"])
def test_user_errors_are_one_line_and_leave_no_temp_files(tmp_path: Path, case: str) -> None:
    kwargs, pattern = user_error(tmp_path, case)
    kwargs = {"block_size": 8, "root": str(tmp_path / "data"), "num_proc": 1, **kwargs}
    inputs = files_in(tmp_path)
    with pytest.raises(ValueError, match=pattern) as err:
        TextData(**kwargs).vocab_size
    assert "\n" not in str(err.value)
    assert {k: v for k, v in files_in(tmp_path).items() if not k.startswith("data/")} == inputs
    shards = tmp_path / "data" / "shards"  # only complete, manifested corpora (and lock files) are left
    assert not shards.exists() or all((p / "manifest.json").is_file() for p in shards.iterdir() if p.is_dir())


TINY = ["trainer=debug", "logger=none", "model.layers=1", "model.heads=2", "model.dim=32", "model.block_size=16",
        "data=text", "data.batch_size=8", "data.val_windows=16", "data.doc_bytes=256", "data.num_proc=1"]


def train_in_process(run_dir: Path, *overrides: str) -> Path:
    """train.train(cfg) on a composed config, as train.py would run it (one Lightning import per session)."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*overrides, f"hydra.run.dir={run_dir}"],
                      return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)  # as Hydra does before a job (a resumed sweep's: there already)
    HydraConfig.instance().set_config(cfg)
    try:
        return train.train(cfg)
    finally:
        HydraConfig.instance().cfg = None


# null, the default, given too: the advice wrote it as Python's None, which Hydra reads back as the string 'None'.
@pytest.mark.parametrize("setting, reader", [("data.vocab_size=300", "bpe"), ("data.compact_vocab=true", "gpt2"),
                                             ("data.compact_vocab=null", "gpt2")])
def test_a_tokenizer_setting_another_tokenizer_ignores_is_refused(tmp_path: Path, text_file: Path, setting: str,
                                                                reader: str) -> None:
    """data.vocab_size=300 beside the char tokenizer trained without a word on the char vocabulary (this file's own
    TINY settings carried it for months); a preset's value, not the command line's, is left to the preset."""
    with pytest.raises(ValueError, match=rf"^{setting} is read by data.tokenizer={reader} only, and this run has "
                                         rf"data.tokenizer=char: drop data\.\w+ \(in a sweep whose other jobs read "
                                         rf"it, give it to all as \+\+{setting}\)$"):
        train_in_process(tmp_path / "run", *TINY, f"data.path={text_file}", f"data.root={tmp_path / 'data'}", setting)
    assert not (tmp_path / "data").exists()  # refused before any preparation


def test_a_tokenizer_setting_given_to_every_job_of_a_sweep_is_left_to_the_jobs_that_read_it(tmp_path: Path,
                                                                                          text_file: Path) -> None:
    """-m data.tokenizer=char,bpe ++data.vocab_size=300: the char job was refused and told to drop the setting, which
    the bpe job needs; ++, as the refusal says, gives it to every job."""
    train_in_process(tmp_path / "run", *TINY, f"data.path={text_file}", f"data.root={tmp_path / 'data'}",
                     "++data.vocab_size=300")
    assert (tmp_path / "run" / "model.pt").is_file()


@pytest.mark.parametrize("tokenizer", ["char", "word", "gpt2", "bpe"])
def test_train_on_text_then_generate(tmp_path: Path, text_file: Path, tokenizer: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)  # the shards go to ./data/
    ckpt = train_in_process(tmp_path / "my run", *TINY, f"data.path={text_file}", f"data.tokenizer={tokenizer}",
                            *(["data.vocab_size=300"] if tokenizer == "bpe" else []))
    _, restored, meta = load_checkpoint(ckpt, with_meta=True)
    assert meta["tokenizer"] == tokenizer and "one_example_per_line" not in meta
    data = load(text_file, tmp_path / "data", block_size=16, tokenizer=tokenizer, vocab_size=300)
    assert restored.to_dict() == data.tokenizer.to_dict()
    # the command the run printed works as printed (a placeholder prompt was refused by a word vocabulary; a path
    # with a space, printed unquoted, split in the shell), from the folder it ran in, where generate.py is not
    command = shlex.split(capsys.readouterr().out.split("generate with: ")[1].split("\n")[0])
    assert command == ["python", str(ROOT / "generate.py"), "--ckpt", str(ckpt)]
    assert generate.main([*command[2:], "--max-new-tokens", "3"]) == 0
    capsys.readouterr()
    assert generate.main(["--ckpt", str(ckpt), "--prompt", "the darling", "--max-new-tokens", "12",
                          "--temperature", "0.8"]) == 0
    out = capsys.readouterr().out
    # The text API's sample with the same settings; it may end its document at once (end-of-text prints nothing).
    assert out == "the darling" + gpt.load(ckpt).complete("the darling", 12, 0.8, seed=0) + "\n"
    if tokenizer == "bpe":  # byte-level: any text encodes, and decodes back exactly
        assert generate.main(["--ckpt", str(ckpt), "--prompt", "the zebra 🦓", "--max-new-tokens", "1"]) == 0
        assert capsys.readouterr().out.startswith("the zebra 🦓")
    else:
        assert generate.main(["--ckpt", str(ckpt), "--prompt", "the zebra"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "vocabulary" in err and err.count("\n") == 1
    assert generate.main(["--ckpt", str(ckpt), "--max-new-tokens", "3"]) == 0  # no prompt: starts after a newline
    assert capsys.readouterr().err == f"model: {ckpt} (trained on text ({text_file}))\n"  # which model, no error
    monkeypatch.chdir(ckpt.parent)  # model.pt finds its shards (under the ./data/ of training) from anywhere
    assert cli(["evaluate", "--ckpt", str(ckpt), "--split", "test"]) == 2  # was the val split, silently
    assert "split into train and val only" in capsys.readouterr().err
    assert cli(["evaluate", "--ckpt", str(ckpt), "--seed", "3"]) == 2  # accepted, and changed nothing
    assert capsys.readouterr().err.endswith("a text model's val split is its prepared corpus's: drop --seed\n")
    assert cli(["evaluate", "--ckpt", str(ckpt)]) == 0  # running text: loss and bits per byte on the val split
    loss, bpb = (float(x) for x in re.findall(r"loss ([\d.]+), bpb ([\d.]+)$", capsys.readouterr().out.strip())[0])
    if tokenizer == "char":  # an ASCII play: one byte per token
        assert bpb == pytest.approx(loss / math.log(2), abs=1e-3)
    else:  # a word or BPE token spans several bytes
        assert 0 < bpb < loss / math.log(2) / 2


def test_a_prepared_folder_refuses_a_setting_the_command_line_gives_at_its_default(
        tmp_path: Path, text_file: Path, capsys: pytest.CaptureFixture) -> None:
    """data.val_fraction=0.1 (the default) on a folder prepared with 0.3 once trained on its 0.3 without a word: the
    check saw a value, not what the command line set. Left unsaid, the folder's own is read."""
    folder = tmp_path / "prepared"
    assert cli(["prepare", str(text_file), "--out", str(folder), "--doc-bytes", "256", "--val-fraction", "0.3",
                "--num-proc", "1"]) == 0
    capsys.readouterr()
    run = [*TINY, f"data.path={folder}", "trainer.max_steps=1"]
    with pytest.raises(ValueError, match=rf"^data.val_fraction=0.1 is not what {folder} was prepared with "
                       r"\(val_fraction=0.3\), and a prepared folder keeps its own: set data.val_fraction=0.3"):
        train_in_process(tmp_path / "given", *run, "data.val_fraction=0.1")
    _, _, meta = load_checkpoint(train_in_process(tmp_path / "unsaid", *run), with_meta=True)
    assert meta["val_fraction"] == 0.3


def test_evaluate_refuses_a_corpus_prepared_again_since_training(tmp_path: Path, text_file: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """The folder deleted and prepared again with another --val-fraction, as a refusal advises: evaluate measured
    the model on the new validation split, much of it text the model had trained on, without a word."""
    folder = tmp_path / "prepared"
    prepare_folder = ["prepare", str(text_file), "--out", str(folder), "--doc-bytes", "256", "--num-proc", "1"]
    assert cli(prepare_folder) == 0
    ckpt = train_in_process(tmp_path / "run", *TINY, f"data.path={folder}", "trainer.max_steps=1")
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(ckpt)]) == 0
    val_tokens = int(re.search(r"\(([\d,]+) char tokens\)", capsys.readouterr().out)[1].replace(",", ""))
    shutil.rmtree(folder)
    assert cli([*prepare_folder, "--val-fraction", "0.5"]) == 0
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder} is not the corpus this model trained on: it holds ")
    assert "validation tokens, that corpus " in err and f"and {val_tokens:,} (prepared again since" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("prepared_with", [[], ["--val-fraction", "0.3"], ["--val", "VAL"]])
def test_evaluate_on_a_corpus_deleted_since_training_names_the_command_that_prepares_it_again(
        tmp_path: Path, text_file: Path, capsys: pytest.CaptureFixture, prepared_with: list[str]) -> None:
    """The shards folder deleted after training: evaluate said to delete it (it was gone) and prepare it again from
    `<inputs>`, which the model.pt records."""
    val = tmp_path / "val.txt"
    val.write_text(play()[:3000])
    options = {"val_path": str(val)} if "--val" in prepared_with else \
        {"val_fraction": 0.3} if prepared_with else {}
    data = load(text_file, tmp_path, tokenizer="word", **options)
    save_model(tmp_path / "model.pt", gpt.GPT(gpt.ModelConfig(vocab_size=data.vocab_size, layers=1, heads=2, dim=32,
                                                                block_size=8)), data.tokenizer, data.meta)
    folder = data.corpus.folder.resolve()
    shutil.rmtree(folder)
    assert cli(["evaluate", "--ckpt", str(tmp_path / "model.pt")]) == 2
    flags = " ".join(str(val) if flag == "VAL" else flag for flag in prepared_with)
    command = f"python -m gpt prepare {text_file} {flags + ' ' * bool(flags)}--tokenizer word --out {folder}"
    assert capsys.readouterr().err == (f"error: {folder}, the prepared corpus this model trained on, is gone: prepare "
                                       f"it there again to measure the model on its validation text: {command} (with "
                                       "the --doc-bytes and --text-field it was prepared with, where not the "
                                       "defaults)\n")
    assert cli(command.split()[3:] + ["--doc-bytes", "256", "--num-proc", "1"]) == 0
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(tmp_path / "model.pt")]) == 0  # the command made the corpus it trained on


def test_the_command_that_prepares_a_corpus_again_reads_paths_starting_with_a_dash_as_paths() -> None:
    """A model.pt recording relative paths that start with '-' named them bare, and prepare read them as options."""
    import argparse

    from gpt.data.prepare_command import add_arguments
    from gpt.evaluation.evaluate import prepare_again

    meta = {"shards": "-out", "path": "-a.txt, -b.txt", "val_path": "-val.txt", "tokenizer": "word"}
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(shlex.split(prepare_again(meta))[4:])
    assert [Path(p) for p in [*args.inputs, *args.val, args.out]] == [Path(p) for p in ["-a.txt", "-b.txt",
                                                                                        "-val.txt", "-out"]]


def model_on_a_prepared_play(tmp_path: Path) -> tuple[Path, Path, list[str], TextData, gpt.ModelConfig]:
    """A play prepared with --out and a tiny untrained model.pt of its corpus: (folder, text file, the prepare
    command, the data, the model's config), for the tests that prepare the folder again under the model."""
    folder, text = tmp_path / "prepared", tmp_path / "play.txt"
    text.write_text(play())
    prepare_folder = ["prepare", str(text), "--out", str(folder), "--doc-bytes", "256", "--num-proc", "1"]
    assert cli(prepare_folder) == 0
    data = load(folder, tmp_path)
    cfg = gpt.ModelConfig(vocab_size=data.vocab_size, layers=1, heads=2, dim=32, block_size=8)
    save_model(tmp_path / "model.pt", gpt.GPT(cfg), data.tokenizer, data.meta)
    return folder, text, prepare_folder, data, cfg


def test_evaluate_refuses_a_corpus_prepared_again_with_another_tokenizer(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    """A folder named with --out, prepared again from other text after a model trained on it: its ids mean other
    tokens to the model, and evaluate scored them (an IndexError traceback when the vocabulary grew)."""
    folder, text, prepare_folder, data, cfg = model_on_a_prepared_play(tmp_path)
    assert cli(["evaluate", "--ckpt", str(tmp_path / "model.pt")]) == 0
    shutil.rmtree(folder)
    text.write_text(play().upper())
    assert cli(prepare_folder) == 0
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(tmp_path / "model.pt")]) == 2
    assert capsys.readouterr().err == (f"error: {folder} is not the corpus this model trained on: its tokenizer is "
                                       "another, so its ids are other tokens to the model; prepare the text it "
                                       "trained on there again, with the settings it had, to measure it on its own "
                                       "validation text\n")


def test_evaluate_on_a_deleted_folder_prepared_with_out_leaves_its_unrecorded_inputs_to_fill(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A model trained on a folder prepared with --out records the folder as its path, not the text it came from."""
    folder, _, _, _, _ = model_on_a_prepared_play(tmp_path)
    shutil.rmtree(folder)
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(tmp_path / "model.pt")]) == 2
    assert f": python -m gpt prepare <the inputs it was prepared from> --tokenizer char --out {folder.resolve()} (" \
        in capsys.readouterr().err


def test_evaluate_refuses_a_corpus_prepared_again_from_text_edited_to_the_same_size(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """One word swapped for another of its length, prepared again: the same tokenizer and as many tokens in each
    split, so evaluate measured the model on text it never trained on as its own validation split."""
    folder, text, prepare_folder, data, cfg = model_on_a_prepared_play(tmp_path)
    shutil.rmtree(folder)
    text.write_text(play().replace("thou", "buds", 1))
    assert cli(prepare_folder) == 0
    again = load(folder, tmp_path)
    assert (len(again.corpus.train), len(again.corpus.val)) == (len(data.corpus.train), len(data.corpus.val))
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(tmp_path / "model.pt")]) == 2
    assert capsys.readouterr().err == (f"error: {folder} is not the corpus this model trained on: its shards hold "
                                       "other ids than that corpus's (prepared again since from edited text, or cut "
                                       "into shards of another size); prepare the text it trained on there again, "
                                       "with the settings it had, to measure it on its own validation text\n")
    older = {k: v for k, v in data.meta.items() if k != "shards_sha256"}  # a model.pt from before the digest
    save_model(tmp_path / "older.pt", gpt.GPT(cfg), data.tokenizer, older)
    assert cli(["evaluate", "--ckpt", str(tmp_path / "older.pt")]) == 0


def test_evaluate_refuses_a_corpus_prepared_again_with_another_kind_of_tokenizer(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The folder prepared again with --tokenizer word under a char model: evaluate advised `set data.tokenizer=word`,
    a setting it has not, for a model that reads characters."""
    folder, _, prepare_folder, _, _ = model_on_a_prepared_play(tmp_path)
    shutil.rmtree(folder)
    assert cli([*prepare_folder, "--tokenizer", "word"]) == 0
    capsys.readouterr()
    assert cli(["evaluate", "--ckpt", str(tmp_path / "model.pt")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {folder} is not the corpus this model trained on: its "
                                              "tokenizer is another, so its ids are other tokens to the model; ")


def test_train_refuses_a_missing_path_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through train.py's job, as Hydra's main runs it (tests/test_first_hour.py runs train.py itself on a data.path
    that does not exist): Hydra's instantiate must not turn a data error into a traceback."""
    monkeypatch.chdir(tmp_path)
    run = job([*TINY, f"data.path={tmp_path / 'nope.txt'}"], tmp_path / "bad", entry=None)
    assert run.code == 2 and run.err.count("\n") == 1
    assert run.err.startswith(f"error: data.path={tmp_path / 'nope.txt'} does not exist")


def test_an_escaped_dollar_brace_in_data_path_reaches_the_reader_as_the_path_written(tmp_path: Path) -> None:
    """data.path='<folder>/a\\${b}/corpus.txt' names a folder really called a${b}: Hydra's instantiate resolved the
    data section a second time, read the unescaped ${b} as an interpolation and stopped with "Interpolation key 'b'
    not found"."""
    corpus = tmp_path / "a${b}" / "corpus.txt"
    corpus.parent.mkdir()
    corpus.write_text(play(20))
    overrides = ["data=text", f"data.path='{tmp_path}/a\\${{b}}/corpus.txt'", f"data.root={tmp_path / 'data'}"]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    assert train.load_data(cfg, overrides).sources == [str(corpus)]


def test_window_stream_resumes_mid_way_and_shares_out_among_ranks_across_shards() -> None:
    """What resume and DDP rely on: skipping `start` batches, and rank r reading every world-th batch; windows
    over several shards equal those over one array holding the same ids."""
    from itertools import islice

    from gpt.data.batches import RandomWindows

    tokens = np.arange(500, dtype=np.uint16)
    sharded = TokenShards([tokens[i:i + 37] for i in range(0, 500, 37)])
    whole = [x for x, _ in islice(iter(RandomWindows(TokenShards([tokens]), 8, 4, seed=3)), 10)]
    assert all(torch.equal(a, b) for (a, _), b in zip(islice(iter(RandomWindows(sharded, 8, 4, seed=3)), 10), whole))
    assert all(torch.equal(row, torch.arange(row[0], row[0] + 8)) for batch in whole for row in batch)
    resumed = RandomWindows(sharded, 8, 4, seed=3)
    resumed.start = 4
    assert all(torch.equal(a, b) for (a, _), b in zip(islice(iter(resumed), 6), whole[4:]))
    rank1 = RandomWindows(sharded, 8, 4, seed=3)
    rank1.start, rank1.rank, rank1.world = 2, 1, 2
    assert all(torch.equal(a, b) for (a, _), b in zip(islice(iter(rank1), 4), whole[3::2]))


def test_row_stream_resumes_mid_way_and_shares_out_among_ranks() -> None:
    """The calculator's rows follow the same rule as text windows (its end-to-end resume and DDP runs moved to
    sharded text): skipping `start` batches, and rank r reading every world-th batch."""
    from itertools import islice

    from gpt.data.batches import RowBatches

    rows = torch.arange(40 * 6).reshape(40, 6)
    stream = lambda: RowBatches(rows, rows + 1, torch.full((40,), 6), batch_size=4, seed=3)  # noqa: E731
    whole = [x for x, _ in islice(iter(stream()), 24)]  # more than one pass over the rows
    resumed, rank1 = stream(), stream()
    resumed.start = 13
    rank1.start, rank1.rank, rank1.world = 2, 1, 2
    assert all(torch.equal(a, b) for (a, _), b in zip(islice(iter(resumed), 11), whole[13:]))
    assert all(torch.equal(a, b) for (a, _), b in zip(islice(iter(rank1), 10), whole[3::2]))



def test_validation_leaves_trainings_random_stream_as_it_was() -> None:
    """A run resumed from a checkpoint written at a validation step (every_n_steps and val_check_interval are both
    200 by default) does not validate at that step again, so validating must draw nothing from the generator
    dropout uses: each validation's DataLoader iterator drew its seed there, and resumed losses differed."""
    from gpt.data.batches import BatchedData

    data = BatchedData()
    data.val_set, data.batch_size = (torch.zeros(5, 4, dtype=torch.long), torch.ones(5, 4, dtype=torch.long)), 2
    before = torch.get_rng_state()
    assert [len(x) for x, _ in data.val_dataloader()] == [2, 2, 1]
    assert torch.equal(torch.get_rng_state(), before)

@pytest.mark.parametrize("preset", ["shakespeare_char_cpu", "shakespeare_char_fast", "shakespeare_char_speedrun",
                                    "shakespeare_gpt2"])
def test_shakespeare_presets_train_on_a_local_text(tmp_path: Path, text_file: Path, preset: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each preset's own parts (bf16 autocast, RoPE, fused QKV in the fast one) train; only the length is cut."""
    monkeypatch.chdir(tmp_path)
    ckpt = train_in_process(tmp_path / "run", f"experiment={preset}", f"data.path={text_file}", "model.layers=1",
                            "trainer.max_steps=4", "trainer.val_check_interval=4", "data.val_windows=4",
                            "trainer.enable_progress_bar=false", "logger=none", "callbacks.sample.max_new_tokens=4",
                            "data.doc_bytes=256", "data.num_proc=1", "data.batch_size=4")
    summary = json.loads((ckpt.parent / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["steps"] == 4 and math.isfinite(summary["val_loss"])
    # Training time per optimizer step and tokens per training second describe the same seconds.
    block_size = load_checkpoint(ckpt)[0].cfg.block_size
    assert summary["tokens_per_s"] * summary["ms_per_step"] / 1000 == pytest.approx(4 * block_size)
    if preset.startswith("shakespeare_char"):  # an ASCII play, one byte per character
        assert summary["val_bpb"] == pytest.approx(summary["val_loss"] / math.log(2), rel=1e-5)
    else:
        assert 0 < summary["val_bpb"] < summary["val_loss"] / math.log(2)  # a BPE token spans several bytes


def test_tinystories_preset_trains_on_generated_stories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own parts (GQA, RoPE, SwiGLU, a trained 512-id BPE, stories split at <|endoftext|>) train; length cut."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stories.txt").write_text("".join(play(6, seed=i) + EOT + "\n" for i in range(400)))
    ckpt = train_in_process(tmp_path / "run", "experiment=tinystories", "data.path=stories.txt", "data.num_proc=1",
                            "trainer.max_steps=2", "trainer.val_check_interval=2", "data.val_windows=4",
                            "data.batch_size=4", "trainer.enable_progress_bar=false", "logger=none",
                            "callbacks.sample.max_new_tokens=4")
    summary = json.loads((ckpt.parent / "summary.json").read_text())
    model, tokenizer, meta = load_checkpoint(ckpt, with_meta=True)
    assert summary["status"] == "ok" and math.isfinite(summary["val_loss"]) and meta["corpus"] == "tinystories"
    assert (model.cfg.attention, model.cfg.pos, model.cfg.kv_heads) == ("gqa", "rope", 4)
    assert tokenizer.kind == "bpe" and tokenizer.eot_id == 0 and meta["train_tokens"] > meta["val_tokens"] > 0


def test_a_prepared_folder_too_short_for_a_window_names_prepare_not_the_settings_it_refuses(tmp_path: Path) -> None:
    # Advised data.doc_bytes or data.val_fraction, which a prepared folder refuses as not what it was prepared with.
    (tmp_path / "one.txt").write_text(play(lines=3))  # one document: none of it falls in the validation split
    assert cli(["prepare", str(tmp_path / "one.txt"), "--out", str(tmp_path / "out"), "--num-proc", "1"]) == 2
    with pytest.raises(ValueError, match=r"^the validation split of .*out has 0 char tokens, fewer than "
                                         r"model.block_size\+1=9: .*delete it and prepare it again with a smaller "
                                         r"--doc-bytes or another --val-fraction$"):
        TextData(path=str(tmp_path / "out"), root=str(tmp_path / "data"), block_size=8).corpus
