import socket
from pathlib import Path

import pytest

from gpt.tokenizers import (GPT2_FILES, TOKENIZERS, CharTokenizer, GPT2Tokenizer, WordTokenizer, fit_tokenizer,
                            gpt2_encoding, tokenizer_from_dict)


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
def test_every_tokenizer_round_trips_through_its_dict(name: str) -> None:
    text = "To be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer\n"
    tokenizer = TOKENIZERS[name].fit(text)
    ids = tokenizer.encode(text)
    assert 0 <= min(ids) and max(ids) < tokenizer.vocab_size
    assert tokenizer.decode(ids).split() == text.split()
    restored = tokenizer_from_dict(tokenizer.to_dict())
    assert (restored.encode(text), restored.vocab_size) == (ids, tokenizer.vocab_size)


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
        with pytest.raises(ValueError, match="Hash mismatch"):
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
    tokenizer = fit_tokenizer(str(tmp_path), text)  # data.tokenizer=<folder>
    assert tokenizer.encode(text) == bpe.encode(text).ids and tokenizer.decode(tokenizer.encode(text)) == text
    restored = tokenizer_from_dict(tokenizer.to_dict())
    assert (restored.encode(text), restored.vocab_size) == (tokenizer.encode(text), bpe.get_vocab_size())
    with pytest.raises(ValueError, match="data.tokenizer=nope is unknown; choose one of char, word, gpt2 or a "):
        fit_tokenizer("nope", text)
