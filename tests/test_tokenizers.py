import pytest

from gpt.tokenizers import CharTokenizer, WordTokenizer, tokenizer_from_dict


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
