"""Train here, use anywhere: `python -m gpt export` folders that transformers loads and decodes exactly as
tinygpt does, and `train.py init_from=` fine-tuning from a Hugging Face folder or a model.pt."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch

from gpt import GPT, ModelConfig, TextModel, generate, load, load_checkpoint
from gpt.__main__ import main as cli
from gpt.data.tokenizers.base import EOT
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer
from gpt.data.tokenizers.hf import HFTokenizer
from gpt.data.tokenizers.vocab import CharTokenizer, WordTokenizer
from gpt.inference.checkpoint import save_model
from tests.conftest import build
from tests.test_data import play, train_in_process
from tests.test_text import chain_model

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

GPT2_PARTS = dict(pos="learned", norm="layernorm", mlp="gelu", attention="mha_fused", bias=True)
SWIGLU_PARTS = dict(pos="rope", norm="rmsnorm", mlp="swiglu")
TEXT = "To be, or not to be, that is the question"


def perturbed(cfg: ModelConfig) -> GPT:
    """A seeded model with norm gains and biases away from 1 and 0, so a lost tensor would show."""
    model = build(cfg)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    return model


def test_exported_gpt2_folder_loads_in_transformers_and_decodes_the_same_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    tokenizer = GPT2Tokenizer()
    model = perturbed(ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=2, dim=32, block_size=32,
                                  **GPT2_PARTS))
    save_model(tmp_path / "model.pt", model, tokenizer)
    monkeypatch.chdir(tmp_path)
    assert cli(["export", "--ckpt", "model.pt", "--to", "hf"]) == 0  # python -m gpt export --ckpt model.pt --to hf
    assert "a Hugging Face gpt2 model and GPT-2's tokenizer files" in capsys.readouterr().out
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ids = hf_tokenizer(TEXT, return_tensors="pt").input_ids
    assert ids[0].tolist() == tokenizer.encode(TEXT)
    with torch.no_grad():
        theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False)
    ours = generate(model, ids, 12, temperature=0)
    assert torch.equal(theirs, ours)
    assert hf_tokenizer.decode(theirs[0]) == tokenizer.decode(ours[0].tolist())


@pytest.mark.parametrize("family, parts", [
    ("llama", dict(SWIGLU_PARTS, attention="gqa", kv_heads=1, tie_embeddings=False)),
    ("mistral", dict(SWIGLU_PARTS, attention="sliding_window", window=4)),
    ("qwen3", dict(SWIGLU_PARTS, attention="mha", qk_norm=True, norm_eps=1e-6)),
])
def test_exported_folders_of_each_family_generate_the_same_greedy_tokens(
        family: str, parts: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tokenizer = CharTokenizer(sorted(set(TEXT)))
    model = perturbed(ModelConfig(vocab_size=tokenizer.vocab_size, layers=2, heads=4, dim=32, block_size=32, **parts))
    save_model(tmp_path / "model.pt", model, tokenizer)
    assert cli(["export", "--ckpt", str(tmp_path / "model.pt"), "--to", str(tmp_path / "hf")]) == 0
    assert f"a Hugging Face {family} model, no tokenizer files" in capsys.readouterr().out
    # transformers wrote model.safetensors 0600, readable by no one else on a shared machine: each file has the
    # permissions a file written with open() gets
    (tmp_path / "written").write_text("")
    mode = oct((tmp_path / "written").stat().st_mode)
    assert {f.name: oct(f.stat().st_mode) for f in (tmp_path / "hf").iterdir()} == \
        {f.name: mode for f in (tmp_path / "hf").iterdir()}
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ids = torch.tensor([tokenizer.encode(TEXT[:10])])
    with torch.no_grad():
        theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False)
    assert torch.equal(theirs, generate(model, ids, 16, temperature=0))


def test_export_mistakes_are_one_line_each(tmp_path: Path, tiny_cfg: ModelConfig,
                                           capsys: pytest.CaptureFixture) -> None:
    save_model(tmp_path / "model.pt", build(tiny_cfg), CharTokenizer(list("abcdefghijklmnopqrstuvwxyz0123456789 ")))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").touch()
    cases = [(["--ckpt", str(tmp_path / "missing.pt")], "no checkpoint at"),
             (["--ckpt", str(tmp_path / "model.pt")],
              "no Hugging Face family has this model's parts: llama needs pos=rope (this model has learned)"),
             (["--ckpt", str(tmp_path / "model.pt"), "--to", str(tmp_path / "full")], "is not an empty folder")]
    for args, message in cases:
        assert cli(["export", "--to", str(tmp_path / "out"), *args]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_export_to_a_folder_that_cannot_be_made_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # The folder is made only when the weights are written, so a --to under a file was a NotADirectoryError traceback.
    save_model(tmp_path / "model.pt", build(ModelConfig(vocab_size=8, **SWIGLU_PARTS)), CharTokenizer(list("abc")))
    (tmp_path / "notes.txt").touch()
    assert cli(["export", "--ckpt", str(tmp_path / "model.pt"), "--to", str(tmp_path / "notes.txt" / "llama")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --to {tmp_path / 'notes.txt' / 'llama'}: ") and err.count("\n") == 1, err


def test_export_refuses_a_folder_in_one_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--to a/b/c made a and b without a word, though the command's own words ask for a folder in one that exists,
    as generate.py's files do: a mistyped parent left a tree of folders behind."""
    save_model(tmp_path / "model.pt", build(ModelConfig(vocab_size=8, **SWIGLU_PARTS)), CharTokenizer(list("abc")))
    to = tmp_path / "a" / "b" / "c"
    assert cli(["export", "--ckpt", str(tmp_path / "model.pt"), "--to", str(to)]) == 2
    assert capsys.readouterr().err == f"error: --to {to}: there is no folder {to.parent} to make it in: create that " \
                                      "first, or name a new folder in one that exists\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_an_export_that_fails_half_way_leaves_no_folder(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that filled after the weights were written left --to holding them without the rest, a folder that
    init_from= read and that refused the export run again as not empty."""
    save_model(tmp_path / "model.pt", build(ModelConfig(vocab_size=8, **SWIGLU_PARTS)), CharTokenizer(list("abc")))
    real = transformers.PreTrainedModel.save_pretrained

    def filling(self: transformers.PreTrainedModel, folder: Path, **kwargs: object) -> None:
        real(self, folder, **kwargs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder))

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", filling)
    assert cli(["export", "--ckpt", str(tmp_path / "model.pt"), "--to", str(tmp_path / "hf")]) == 2
    assert "cannot write there (No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]
    monkeypatch.undo()
    assert cli(["export", "--ckpt", str(tmp_path / "model.pt"), "--to", str(tmp_path / "hf")]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'hf'}: a Hugging Face llama model")
    assert (tmp_path / "hf" / "model.safetensors").is_file()


def random_gpt2_folder(folder: Path) -> Path:
    """What a user's downloaded GPT-2 folder looks like, at a tiny size: GPT-2's vocabulary, random weights."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_positions=64, n_embd=32, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def test_finetune_preset_starts_from_a_gpt2_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = random_gpt2_folder(tmp_path / "gpt2")
    (tmp_path / "input.txt").write_text(play(lines=400))
    monkeypatch.chdir(tmp_path)  # the shards go to ./data/
    ckpt = train_in_process(tmp_path / "run", "experiment=finetune_shakespeare", f"init_from={folder}",
                            "data.path=input.txt", "data.doc_bytes=256", "logger=none", "trainer.max_steps=4",
                            "trainer.val_check_interval=2", "data.val_windows=8", "model.block_size=32",
                            "trainer.enable_progress_bar=false")
    tuned, tokenizer = load_checkpoint(ckpt)
    assert tokenizer.to_dict() == GPT2Tokenizer().to_dict()
    assert (tuned.cfg.block_size, tuned.cfg.dropout) == (32, 0.1)
    original = transformers.GPT2LMHeadModel.from_pretrained(folder).state_dict()
    start, now = original["transformer.wte.weight"], tuned.tok_emb.weight
    change = (now - start).abs().max().item()
    assert 0 < change < 1e-3  # four steps at lr 3e-5 moved the pretrained weights, not a fresh init (std 0.02)
    torch.testing.assert_close(tuned.pos.table.weight, original["transformer.wpe.weight"][:32], atol=1e-3, rtol=0)


def test_a_corpus_tokenizer_other_than_the_pretrained_ones_is_refused(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = random_gpt2_folder(tmp_path / "gpt2")
    (tmp_path / "input.txt").write_text(play(lines=100))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="^init_from=.* reads a gpt2 tokenizer of 50,257 ids but this corpus is "
                                         "tokenized with a char tokenizer of .*: set data.tokenizer=gpt2 "
                                         r"data.compact_vocab=false \(a folder from `python -m gpt prepare`: "
                                         r"prepare it again with --tokenizer gpt2 --compact-vocab false\)$"):
        train_in_process(tmp_path / "run", "experiment=finetune_shakespeare", f"init_from={folder}",
                         "data.path=input.txt", "data.doc_bytes=64", "data.tokenizer=char")


def test_init_from_refuses_architecture_settings_and_takes_how_to_run(tmp_path: Path) -> None:
    """init_from keeps its model's architecture: model.layers=4 (or attention=gqa) on the command line trained the
    pretrained 1-layer model without a word. How to run it (the kernel, like block_size and dropout) is the run's."""
    from gpt.training.init_from import start_from

    tokenizer = CharTokenizer(list("abc"))
    save_model(tmp_path / "model.pt", perturbed(ModelConfig(vocab_size=3, layers=1, block_size=16)), tokenizer)
    with pytest.raises(ValueError, match=rf"^model.layers=4: init_from={tmp_path / 'model.pt'} keeps its model's "
                                         r"layers=1; drop it \(init_from takes model.block_size, model.dropout, "
                                         r"model.kernel, model.trace_shapes from the run\)$"):
        start_from(str(tmp_path / "model.pt"), ModelConfig(vocab_size=3, layers=4), tokenizer, {"layers": 4})
    with pytest.raises(ValueError, match=r"^model.attention=gqa: init_from=.* keeps its model's attention=mha"):
        start_from(str(tmp_path / "model.pt"), ModelConfig(vocab_size=3), tokenizer, {"attention": "gqa"})
    tuned, _, _ = start_from(str(tmp_path / "model.pt"), ModelConfig(vocab_size=3, layers=4, kernel="math"),
                             tokenizer, {"layers": 1, "kernel": "math"})  # its own value given: nothing to refuse
    assert (tuned.layers, tuned.kernel) == (1, "math")


def test_init_from_refuses_an_architecture_setting_written_with_plus_plus_too(tmp_path: Path) -> None:
    """++ gives a setting to every job of a sweep, the jobs that ignore it included; under init_from it let
    ++model.qk_norm=true train the pretrained model without it, and the run's overrides said it had it."""
    run = ["trainer=debug", "trainer.max_steps=1", "logger=none", "model.layers=1", "model.dim=32", "model.heads=2",
           "data.batch_size=16", "data.eval_lines=2"]
    first = train_in_process(tmp_path / "first", *run).parent
    with pytest.raises(ValueError, match=rf"^model.qk_norm=true: init_from={first} keeps its model's qk_norm=false"):
        train_in_process(tmp_path / "tuned", *run, f"init_from={first}", "++model.qk_norm=true")


def test_a_compact_prepared_folder_under_full_gpt2_names_the_way_out(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The finetune preset on a folder prepared with GPT-2's compact vocabulary: the folder's advice, drop
    data.compact_vocab, could not drop the preset's, and init_from's advice, data.compact_vocab=false, was what the
    folder refused. Each now says what works from where the user is; only preparing again trains, and it does."""
    folder = random_gpt2_folder(tmp_path / "gpt2")
    (tmp_path / "input.txt").write_text(play(lines=100))
    monkeypatch.chdir(tmp_path)
    prepare = ["prepare", "input.txt", "--tokenizer", "gpt2", "--doc-bytes", "64", "--num-proc", "1"]
    assert cli([*prepare, "--out", "compact"]) == 0
    run = ["experiment=finetune_shakespeare", f"init_from={folder}", "trainer.max_steps=1", "logger=none",
           "model.block_size=16"]
    with pytest.raises(ValueError, match=r"keeps its own: set data.compact_vocab=true, or prepare it again with "
                                         r"--compact-vocab false$"):
        train_in_process(tmp_path / "preset_run", *run, "data.path=compact")
    with pytest.raises(ValueError, match=r"data.compact_vocab=false \(a folder from `python -m gpt prepare`: prepare "
                                         r"it again with --tokenizer gpt2 --compact-vocab false\)$"):
        train_in_process(tmp_path / "compact_run", *run, "data.path=compact", "data.compact_vocab=true")
    assert cli([*prepare, "--out", "full", "--compact-vocab", "false"]) == 0
    train_in_process(tmp_path / "full_run", *run, "data.path=full")


def test_finetune_from_a_llama_folder_with_its_own_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A family read through its folder's tokenizer.json: here a small BPE trained on the text in the test."""
    text = play(lines=200)
    (tmp_path / "input.txt").write_text(text)
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.train_from_iterator([text], tokenizers.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()))
    folder = tmp_path / "llama"
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=64)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    bpe.save(str(folder / "tokenizer.json"))
    monkeypatch.chdir(tmp_path)
    ckpt = train_in_process(tmp_path / "run", "trainer=debug", "trainer.max_steps=2", "logger=none", "data=text",
                            "data.path=input.txt", "data.doc_bytes=256", f"data.tokenizer={folder}",
                            f"init_from={folder}",
                            "model.block_size=32", "data.batch_size=4", "data.val_windows=8")
    model, tokenizer = load_checkpoint(ckpt)
    assert (model.cfg.attention, model.cfg.mlp, tokenizer.vocab_size) == ("mha", "swiglu", bpe.get_vocab_size())
    assert tokenizer.decode(tokenizer.encode(text[:200])) == text[:200]
    assert tokenizer.encode(text[:200]) == bpe.encode(text[:200]).ids
    # exported, the folder carries that tokenizer back out: transformers reads it and tokenizes alike
    from gpt.hf.export import save_hf

    assert "and the tokenizer.json it was trained with" in save_hf(model, tokenizer, tmp_path / "out")
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "out")(text[:200])["input_ids"] == \
        bpe.encode(text[:200]).ids


def test_a_gpt2_folder_with_another_vocabulary_is_read_with_its_own_tokenizer(tmp_path: Path) -> None:
    # GPT-2's layout trained on another language: init_from= read its ids as GPT-2's English BPE, so with a vocabulary
    # of 50,257 or more it fine-tuned on text tokenized into other words, silently.
    from gpt.hf import folder_tokenizer

    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.train_from_iterator([TEXT], tokenizers.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()))
    config = transformers.GPT2Config(vocab_size=bpe.get_vocab_size(), n_positions=16, n_embd=16, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    bpe.save(str(tmp_path / "tokenizer.json"))
    assert folder_tokenizer(tmp_path).encode(TEXT) == bpe.encode(TEXT).ids
    assert isinstance(folder_tokenizer(random_gpt2_folder(tmp_path / "gpt2")), GPT2Tokenizer)  # no files: GPT-2's


def llama_style_tokenizer(post_processor: str) -> HFTokenizer:
    """A byte-level BPE with Llama's special tokens whose post-processor adds BOS to every text: as Llama 2's
    (TemplateProcessing) or Llama 3's (ByteLevel, then TemplateProcessing)."""
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.train_from_iterator([TEXT], tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"],
                                                                   initial_alphabet=bpe.pre_tokenizer.alphabet()))
    bos = tokenizers.processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 0)])
    bpe.post_processor = bos if post_processor == "template" else tokenizers.processors.Sequence(
        [tokenizers.processors.ByteLevel(trim_offsets=False), bos])
    return HFTokenizer(bpe.to_str())


@pytest.mark.parametrize("post_processor", ["template", "sequence"])
def test_an_exported_tokenizer_adds_no_bos_tinygpt_never_trained_on(post_processor: str, tmp_path: Path) -> None:
    # The folder's tokenizer.json was copied as it was: transformers' tokenizer(text) began with BOS, an id the model
    # never saw in front of a text.
    from gpt.hf.export import save_hf

    tokenizer = llama_style_tokenizer(post_processor)
    assert tokenizer.backend.encode(TEXT).ids[0] == 0  # the folder's own tokenizer adds BOS
    model = build(ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=2, dim=32, block_size=32,
                              **SWIGLU_PARTS))
    save_hf(model, tokenizer, tmp_path / "hf")
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert hf_tokenizer(TEXT)["input_ids"] == tokenizer.encode(TEXT)
    # and its end-of-text token (</s>) is the exported model's and tokenizer's EOS
    assert hf_tokenizer.eos_token_id == tokenizer.eot_id == 1
    assert transformers.AutoConfig.from_pretrained(tmp_path / "hf").eos_token_id == 1


def test_an_exported_model_stops_at_end_of_text_where_tinygpt_does(tmp_path: Path) -> None:
    # eos_token_id was None in the export of any tokenizer but GPT-2's full BPE, so transformers' generate decoded
    # past the end-of-text token where tinygpt's text API stops.
    from gpt.hf.export import save_hf

    chars = CharTokenizer(list("abc ") + [EOT])
    a, b, c, eot = (chars.ids[t] for t in ("a", "b", "c", EOT))
    model = chain_model([a, b, c, eot, a], chars.vocab_size)
    save_hf(model, chars, tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ids = torch.tensor([chars.encode("a")])
    with torch.no_grad():
        theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False)
    ours = TextModel(model, chars, {}).complete("a", max_new_tokens=12, temperature=0)
    assert theirs[0, 1:].tolist() == [*chars.encode(ours), eot] == [b, c, eot]


@pytest.mark.parametrize("end_of_text", [[], [EOT]])
def test_an_exported_line_based_model_stops_at_the_end_of_the_line_where_tinygpt_does(
        end_of_text: list[str], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # A calculator model has no end-of-text token: its export had no eos_token_id, so transformers' generate answered
    # on past the newline into problems of its own, where tinygpt's text API stops at the end of the line.
    words = WordTokenizer(["\n", "two", "plus", "three", "equals", "five", "six", "times", *end_of_text])
    two, plus, three, equals, five, newline, six, times = (words.ids[w] for w in (
        "two", "plus", "three", "equals", "five", "\n", "six", "times"))
    model = chain_model([two, plus, three, equals, five, newline, six, times], words.vocab_size)
    save_model(tmp_path / "model.pt", model, words, {"corpus": "calculator", "one_example_per_line": True})
    assert cli(["export", "--ckpt", str(tmp_path / "model.pt"), "--to", str(tmp_path / "hf")]) == 0
    capsys.readouterr()
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    text_model = load(tmp_path / "model.pt")
    ids = torch.tensor([text_model.prompt_ids("two plus three equals")])
    with torch.no_grad():
        theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False)
    assert text_model.complete("two plus three equals") == "five"
    assert theirs[0, ids.shape[1]:].tolist() == [five, newline]


@pytest.mark.parametrize("block_size", [8, 16])
def test_init_from_a_model_pt_with_random_positions_keeps_its_whole_table(tmp_path: Path, block_size: int) -> None:
    # Its learned table holds model.random_positions rows, which the tuned model builds too: cut to the block, the
    # weights did not fit it and train.py ended in a load_state_dict traceback.
    from gpt.training.init_from import start_from

    tokenizer = CharTokenizer(list("abc"))
    model = perturbed(ModelConfig(vocab_size=3, block_size=16, random_positions=64))
    save_model(tmp_path / "model.pt", model, tokenizer)
    tuned, weights, _ = start_from(str(tmp_path / "model.pt"), ModelConfig(vocab_size=3, block_size=block_size),
                                   tokenizer)
    assert (tuned.block_size, tuned.random_positions) == (block_size, 64)
    GPT(tuned).load_state_dict(weights)
    assert torch.equal(weights["pos.table.weight"], model.pos.table.weight)


def test_init_from_an_exported_folder_without_a_tokenizer_names_the_model_pt(tmp_path: Path) -> None:
    # export writes the weights alone for tinygpt's own tokenizers; init_from of that folder said data.tokenizer
    # takes char, word, gpt2, bpe or a folder, on a run that set no data.tokenizer.
    from gpt.hf import to_hf
    from gpt.training.init_from import start_from

    to_hf(perturbed(ModelConfig(vocab_size=3, pos="rope", mlp="swiglu"))).save_pretrained(tmp_path / "my-model")
    with pytest.raises(ValueError, match="holds no tokenizer.*the model.pt it was exported from"):
        start_from(str(tmp_path / "my-model"), ModelConfig(vocab_size=3), CharTokenizer(list("abc")))


def test_init_from_a_run_folder_starts_from_its_model_pt(tmp_path: Path) -> None:
    # generate, export and gpt.load take the run folder train.py prints; init_from= refused it as neither a model.pt
    # nor a Hugging Face folder.
    from gpt.training.init_from import check_init_from, start_from

    tokenizer = CharTokenizer(list("abc"))
    model = perturbed(ModelConfig(vocab_size=3, block_size=16))
    (tmp_path / "run").mkdir()
    save_model(tmp_path / "run" / "model.pt", model, tokenizer)
    check_init_from(str(tmp_path / "run"))
    tuned, weights, _ = start_from(str(tmp_path / "run"), ModelConfig(vocab_size=3, block_size=16, dropout=0.1),
                                   tokenizer)
    assert tuned.dropout == 0.1
    assert all(torch.equal(weights[name], tensor) for name, tensor in model.state_dict().items())
    with pytest.raises(ValueError, match="is neither a model.pt"):
        check_init_from(str(tmp_path))  # a folder holding neither


def test_init_from_a_bpe_model_of_another_vocab_size_names_its_size(tmp_path: Path) -> None:
    # On the text it was trained on with data.tokenizer=bpe and another data.vocab_size, the refusal said to set
    # data.tokenizer=bpe on the text it was trained on: what the run already did.
    from gpt.data.tokenizers.bpe import BPETokenizer
    from gpt.training.init_from import start_from
    from tests.test_tokenizers import Texts

    corpus = Texts([play(20)])
    its, ours = BPETokenizer.learn(corpus, 300), BPETokenizer.learn(corpus, 280)
    save_model(tmp_path / "model.pt", perturbed(ModelConfig(vocab_size=300, layers=1, dim=32, heads=2)), its)
    with pytest.raises(ValueError, match=r"reads a bpe tokenizer of 300 ids but this corpus is tokenized with a bpe "
                                         r"tokenizer of 280 ids: set data.tokenizer=bpe data.vocab_size=300 on the "):
        start_from(str(tmp_path / "model.pt"), ModelConfig(vocab_size=280), ours)


def test_init_from_a_task_model_names_its_task_not_a_tokenizer(tmp_path: Path) -> None:
    # A task's vocabulary follows from its knobs: the refusal said to set data.tokenizer=word "on the text it was
    # trained on", a setting no task takes, for a model that never saw a text.
    from gpt.training.init_from import start_from

    its, ours = WordTokenizer([f"k{i}" for i in range(8)]), WordTokenizer([f"k{i}" for i in range(6)])
    meta = {"corpus": "recall", "tasks": {"recall": {"pairs": [4, 8], "queries": None, "keys": 4, "values": 4}}}
    save_model(tmp_path / "model.pt", perturbed(ModelConfig(vocab_size=8, layers=1, dim=32, heads=2)), its, meta)
    # Quoted for the shell: unquoted, [4,8] is a pattern that zsh refuses and bash may match to a file.
    with pytest.raises(ValueError, match=r"tokenizer of 6 ids: set data=recall 'data.tasks.recall.pairs=\[4,8\]' "
                                         r"data.tasks.recall.queries=null data.tasks.recall.keys=4 "
                                         r"data.tasks.recall.values=4 \(what it was trained on\)$"):
        start_from(str(tmp_path / "model.pt"), ModelConfig(vocab_size=6), ours)


def test_init_from_a_folder_with_its_own_tokenizer_names_it_whole_to_paste(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`set data.tokenizer=/models/my llama, v2` split in the shell, and its comma was a sweep in Hydra."""
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser

    import gpt.training.init_from as init_from

    its = llama_style_tokenizer("template")
    model = build(ModelConfig(vocab_size=its.vocab_size, layers=1, heads=2, dim=32, **SWIGLU_PARTS))
    monkeypatch.setattr(init_from, "load_pretrained", lambda path: (model, its, {}))  # as a Hugging Face folder reads
    folder = str(tmp_path / "my llama, v2")
    with pytest.raises(ValueError, match="tokenized with a char tokenizer") as refused:
        init_from.start_from(folder, ModelConfig(vocab_size=5), CharTokenizer(list("abcd")))
    [word] = shlex.split(str(refused.value).split(": set ")[1])
    override = OverridesParser.create().parse_override(word)
    assert (override.key_or_group, override.value()) == ("data.tokenizer", folder)


def test_init_from_an_exported_gpt2_folder_without_a_tokenizer_names_the_model_pt(tmp_path: Path) -> None:
    # A gpt2 folder without tokenizer files is read as GPT-2's BPE; one export wrote for a word model of 3 ids was
    # refused as having fewer embedding rows than 50,257 ids, naming no fix.
    from gpt.hf import to_hf
    from gpt.training.init_from import start_from

    to_hf(perturbed(ModelConfig(vocab_size=3, **GPT2_PARTS))).save_pretrained(tmp_path / "my-model")
    with pytest.raises(ValueError, match="holds no tokenizer.*the model.pt it was exported from"):
        start_from(str(tmp_path / "my-model"), ModelConfig(vocab_size=3), CharTokenizer(list("abc")))
