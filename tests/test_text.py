"""The text API: line-based corpora get their line start and stop at the end of the line, and every way
of decoding (stream, complete, complete_batch, the low-level generate) agrees token for token."""
from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from gpt import GPT, ModelConfig, TextModel, generate, load
from gpt.data.tokenizers import tokenizer_from_dict
from gpt.data.tokenizers.base import EOT
from gpt.data.tokenizers.bpe import BPETokenizer
from gpt.data.tokenizers.gpt2 import GPT2Tokenizer
from gpt.data.tokenizers.vocab import CharTokenizer, WordTokenizer
from gpt.inference.checkpoint import save_model
from gpt.inference.compiled import compile_for_decoding
from gpt.inference.text import PromptWarning
from tests.conftest import build, calculator_tokenizer
from tests.test_tokenizers import Texts

PROMPTS = ["two plus three equals", "ninety nine plus ninety nine equals", "six times eight equals", ""]


def calculator_model(seed: int = 0) -> TextModel:
    tokenizer = calculator_tokenizer()
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=2, dim=32, block_size=24)
    return TextModel(build(cfg, seed), tokenizer, {"one_example_per_line": True})


def test_line_based_prompts_start_a_line_and_completions_stop_at_its_end() -> None:
    text_model = calculator_model()
    newline = text_model.tokenizer.encode("\n")[0]
    for prompt in PROMPTS:
        ids = text_model.prompt_ids(prompt)
        assert ids == [newline, *text_model.tokenizer.encode(prompt)]
        full = generate(text_model.model, torch.tensor([ids]), 24, temperature=0.0, stop_token=newline)[0, len(ids):]
        new = full.tolist()
        new = new[:new.index(newline)] if newline in new else new
        expected = text_model.tokenizer.decode(ids + new)[len(text_model.tokenizer.decode(ids)):].lstrip(" ")
        assert text_model.complete(prompt) == expected
        assert "\n" not in text_model.complete(prompt)


def test_a_line_based_prompt_that_ends_its_line_is_refused() -> None:
    """A prompt read from a file keeps its line break: the trained calculator then answered 'two plus three equals\n'
    with 'forty five', a line of its own, and the answer to the problem never came."""
    text_model = calculator_model()
    for prompt in ("two plus three equals\n", "two plus three equals\r\n", "\n"):
        with pytest.raises(ValueError, match="ends its line, so this model would write a line of its own"):
            text_model.complete(prompt)
        with pytest.raises(ValueError, match="ends its line"):
            text_model.complete_batch([prompt], max_new_tokens=24)
    assert text_model.prompt_ids("two plus\nthree") == text_model.tokenizer.encode("\ntwo plus\nthree")


def test_stream_complete_and_complete_batch_agree() -> None:
    for seed in range(3):
        text_model = calculator_model(seed)
        singles = [text_model.complete(p) for p in PROMPTS]
        assert singles == [("".join(text_model.stream(p))).lstrip(" ") for p in PROMPTS]
        assert text_model.complete_batch(PROMPTS, max_new_tokens=24) == singles
        assert text_model.complete_batch(PROMPTS) == singles  # complete's default length: required here before


def test_generate_given_a_text_model_is_refused_naming_its_gpt() -> None:
    # gpt.generate(gpt.load(path), ids, ...) was "'TextModel' object has no attribute 'cfg'".
    text_model = calculator_model()
    ids = torch.tensor([text_model.prompt_ids("two plus")])
    with pytest.raises(ValueError, match=r"^generate takes a GPT, not a TextModel: pass the GPT \(a TextModel's "
                                         r"\.model\), or call the TextModel's complete or stream with text$"):
        generate(text_model, ids, 2, temperature=0)
    assert generate(text_model.model, ids, 2, temperature=0).shape == (1, ids.shape[1] + 2)


def test_a_model_in_training_mode_completes_as_in_evaluation_and_stays_in_training_mode() -> None:
    # gpt.load(path).model.train(), for a fine-tuning loop, made complete's greedy answers differ from call to call
    # (its dropout on), and from complete_batch's, which decoded in evaluation mode.
    text_model = calculator_model()
    cfg = replace(text_model.model.cfg, dropout=0.5)
    dropping = TextModel(build(cfg), text_model.tokenizer, text_model.meta)
    answers = [dropping.complete(p) for p in PROMPTS]
    dropping.model.train()
    for _ in range(3):
        assert [dropping.complete(p) for p in PROMPTS] == answers
        assert ["".join(dropping.stream(p)).lstrip(" ") for p in PROMPTS] == answers
        assert dropping.complete_batch(PROMPTS) == answers
    assert dropping.model.training


def test_sampling_is_reproducible_by_seed_and_greedy_by_default_only_on_line_corpora() -> None:
    text_model = calculator_model()
    sampled = [text_model.complete("two plus", max_new_tokens=12, temperature=1.0, seed=s) for s in range(4)]
    assert sampled == [text_model.complete("two plus", max_new_tokens=12, temperature=1.0, seed=s)
                       for s in range(4)]
    assert len(set(sampled)) > 1  # an untrained model's samples differ by seed
    assert text_model.defaults(None, None)[1] == 0.0
    chars = CharTokenizer(list("\nabc "))
    running = TextModel(build(ModelConfig(vocab_size=5, layers=1, heads=2, dim=32, block_size=16)), chars, {})
    assert running.prompt_ids("") == chars.encode("\n")  # no prompt: start as after a line break
    assert running.defaults(None, None)[1] > 0.0 and running.defaults(None, None)[2] is None
    assert len(running.complete("ab", max_new_tokens=7, seed=0)) == 7  # one character per token


def test_a_text_model_built_without_its_corpus_conventions_is_refused() -> None:
    """TextModel(net, tokenizer) took a calculator model for running text: 200 tokens sampled at temperature 0.8."""
    net, tokenizer = calculator_model().model, calculator_tokenizer()
    with pytest.raises(TypeError, match="meta"):
        TextModel(net, tokenizer)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"^meta=None must be a mapping, the corpus's conventions: pass model\.pt's "
                                         r"\(gpt\.load, .*\{'one_example_per_line': True\} for a calculator or task "
                                         r"model, or \{\} for running text$"):
        TextModel(net, tokenizer, None)  # type: ignore[arg-type]


def test_a_text_model_of_something_else_than_a_gpt_and_its_tokenizer_is_refused() -> None:
    # TextModel(tokenizer, net, meta), its arguments swapped, or a tokenizer of another library, was built without a
    # word and failed at the first prompt, deep inside: "'GPT' object has no attribute 'eot_id'".
    net, tokenizer = calculator_model().model, calculator_tokenizer()
    with pytest.raises(ValueError, match=r"^TextModel takes a GPT first, not a WordTokenizer: TextModel\(model, "
                                         r"tokenizer, meta\), as gpt.load_checkpoint\(path\) returns them$"):
        TextModel(tokenizer, net, {})  # type: ignore[arg-type]
    for foreign in (net, "word"):
        with pytest.raises(ValueError, match=rf"^TextModel takes this project's tokenizer, not a "
                                             rf"{type(foreign).__name__}: TextModel\(model, tokenizer, meta\), as "
                                             r"gpt.load_checkpoint\(path\) returns them$"):
            TextModel(net, foreign, {})  # type: ignore[arg-type]


def test_a_seed_beside_a_generator_is_refused_rather_than_ignored() -> None:
    # The generator was used and the seed dropped silently, so the sample was not the seed's.
    text_model = calculator_model()
    with pytest.raises(ValueError, match="seed=1 and a generator were both given: pass seed= .* or generator="):
        text_model.complete("two plus", temperature=1.0, seed=1, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("kwargs, message", [
    ({"seed": "1"}, "seed='1' must be an integer or None"),
    ({"seed": 1.0}, "seed=1.0 must be an integer or None"),
    ({"seed": 2**64}, "seed=18446744073709551616 must be in [-9223372036854775808, 18446744073709551615]"),
    ({"max_new_tokens": 2.5}, "max_new_tokens=2.5 must be an integer"),
    ({"generator": 5}, "generator=5 must be a torch.Generator: pass seed=5 for a seed"),  # was ignored when greedy
])
def test_a_seed_or_length_of_the_wrong_type_is_refused_in_one_line(kwargs: dict, message: str) -> None:
    # torch's manual_seed raised a RuntimeError ("manual_seed expected a long") for seed="1", and overflowed past its
    # range; a float length failed in range().
    with pytest.raises(ValueError) as err:
        calculator_model().complete("two plus", **{"temperature": 1.0, **kwargs})
    assert str(err.value) == message


@pytest.mark.parametrize("call, message", [
    (lambda m: m.complete(5), "the prompt is a int: pass text"),
    (lambda m: m.complete_batch("two plus"), "complete_batch takes a list of prompts, not one string"),
    (lambda m: m.complete_batch(["two plus"], batch_size=0), "batch_size=0 must be at least 1"),
])
def test_a_prompt_that_is_not_text_or_a_batch_that_is_not_a_list_is_refused(call: Callable[[TextModel], object],
                                                                             message: str) -> None:
    """complete_batch("two plus") completed each of its characters as a prompt of its own, without a word;
    complete(5) and batch_size=0 failed inside Python ("'int' object is not iterable", "range() arg 3")."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        call(calculator_model())


def test_running_text_of_one_line_documents_starts_an_empty_prompt_after_the_end_of_text_token() -> None:
    # A char vocabulary learned from JSONL of one-line documents has no line break: an empty prompt (generate.py's
    # default, and the training sample's) was refused for a '\n' nobody typed, which ended training at its first
    # validation.
    chars = CharTokenizer(list("abc ") + ["<|endoftext|>"])
    running = TextModel(build(ModelConfig(vocab_size=5, layers=1, heads=2, dim=32, block_size=16)), chars, {})
    assert running.prompt_ids("") == [chars.eot_id]
    assert len(list(running.stream("", max_new_tokens=5, seed=0))) == 5
    bare = TextModel(running.model, CharTokenizer(list("abcde")), {})
    with pytest.raises(ValueError, match="no line break or end-of-text token to start from: pass a prompt"):
        bare.complete("")


def test_a_tokenizer_that_drops_line_breaks_starts_an_empty_prompt_after_the_end_of_text_token() -> None:
    """A folder's tokenizer whose pre-tokenizer splits on whitespace encodes '\\n' as nothing: the training sample fed
    the model no ids, and the run ended at its first validation in 'token ids of dtype torch.float32'."""
    tokenizers = pytest.importorskip("tokenizers")
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "</s>": 1, "to": 2, "be": 3},
                                                             unk_token="[UNK]"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = tokenizer_from_dict({"kind": "hf", "vocab": words.to_str()})
    assert tokenizer.encode("\n") == []
    running = TextModel(build(ModelConfig(vocab_size=4, layers=1, heads=2, dim=32, block_size=16)), tokenizer, {})
    assert running.prompt_ids("") == running.prompt_ids(" ") == [1]
    assert isinstance(running.complete("", max_new_tokens=5, seed=0), str)


def chain_model(chain: list[int], vocab_size: int) -> GPT:
    """A Llama-parts model whose greedy next token after chain[i] is chain[i + 1]: its blocks add nothing, each
    token's embedding is a unit vector and the head maps it to the id of its successor."""
    model = GPT(ModelConfig(vocab_size=vocab_size, layers=1, heads=2, dim=32, block_size=16, pos="rope",
                            mlp="swiglu", tie_embeddings=False))
    with torch.no_grad():
        for param in model.blocks.parameters():
            param.zero_()
        model.tok_emb.weight.copy_(torch.eye(vocab_size, 32))
        model.head.weight.zero_()
        for token, successor in zip(chain, chain[1:]):
            model.head.weight[successor, token] = 10.0
    return model.eval()


def test_running_text_stops_at_the_end_of_text_token() -> None:
    # A document ends at end-of-text, and transformers' generate of an exported model stops there; the text API
    # went on into the next document, printing "<|endoftext|>" and what followed.
    chars = CharTokenizer(list("abc ") + [EOT])
    a, b, c, eot = (chars.ids[t] for t in ("a", "b", "c", EOT))
    running = TextModel(chain_model([a, b, c, eot, a], chars.vocab_size), chars, {})
    assert running.complete("a", temperature=0) == "bc"
    assert list(running.stream("a", max_new_tokens=50, temperature=0)) == ["b", "c"]  # a length asked for too
    assert running.complete_batch(["a", "b"], max_new_tokens=50) == ["bc", "c"]
    ids = torch.tensor([chars.encode("a")])
    assert generate(running.model, ids, 6, temperature=0)[0, 1:].tolist() == [b, c, eot, a, b, c]  # ids in, ids out


def test_an_embedding_padded_past_the_tokenizer_never_samples_a_padding_id() -> None:
    """A model.pt whose vocabulary was padded to a round size (init_from a padded model) has ids its tokenizer cannot
    decode: sampling one ended generate.py in an IndexError traceback. They are left out of sampling, so the padded
    model decodes exactly as the same model cut to its tokenizer's ids."""
    tokenizer = calculator_tokenizer()
    padded = build(ModelConfig(vocab_size=64, layers=1, heads=2, dim=32, block_size=24, tie_embeddings=False))
    with torch.no_grad():
        padded.head.weight[tokenizer.vocab_size:] *= 50  # the padding ids, likelier than any real one
    cut = GPT(replace(padded.cfg, vocab_size=tokenizer.vocab_size)).eval()
    cut.load_state_dict({name: weight[:tokenizer.vocab_size] if name in ("tok_emb.weight", "head.weight") else weight
                         for name, weight in padded.state_dict().items()})
    ids = torch.tensor([calculator_model().prompt_ids("two plus")])
    assert generate(padded, ids, 24, temperature=1.0).max() >= tokenizer.vocab_size  # ids in, ids out: no tokenizer
    meta = {"one_example_per_line": True}
    padded_text, cut_text = TextModel(padded, tokenizer, meta), TextModel(cut, tokenizer, meta)
    for seed in range(3):
        assert padded_text.complete("two plus", 24, 1.0, seed=seed) == cut_text.complete("two plus", 24, 1.0, seed=seed)
    assert padded_text.complete_batch(PROMPTS, 24) == cut_text.complete_batch(PROMPTS, 24)


def test_a_character_split_across_byte_level_pieces_streams_whole() -> None:
    """GPT-2's BPE spells 🦓 in three pieces: the first two decode to U+FFFD alone, and stream (so complete and
    generate.py) printed "a �� b" where complete_batch gave "a 🦓 b"; a piece that ends mid-character now waits
    for the rest of its bytes."""
    full = GPT2Tokenizer()
    bpe = full.encode("a 🦓 b")
    tokenizer = GPT2Tokenizer(sorted({*bpe, full.eot_id}))
    ids = tokenizer.encode("a 🦓 b")
    running = TextModel(chain_model([*ids, tokenizer.eot_id], tokenizer.vocab_size), tokenizer, {})
    assert list(running.stream("a", temperature=0)) == [" ", "🦓", " b"]
    assert running.complete("a", temperature=0) == running.complete_batch(["a"], 10)[0] == " 🦓 b"
    assert "".join(running.stream("a", max_new_tokens=2, temperature=0)) == " \ufffd"  # cut off: what decode says


@pytest.mark.parametrize("line_based", [True, False])
def test_a_trailing_space_the_tokenizer_drops_is_not_streamed_again(line_based: bool) -> None:
    """generate.py prints the prompt, then what stream yields: "one plus two equals " read "one plus two equals  three"
    with two spaces, the word tokenizer having dropped the prompt's own space and joined the answer with one more."""
    tokenizer = WordTokenizer(["\n", "one", "plus", "two", "equals", "three", ".", EOT])
    stop = tokenizer.encode("\n")[0] if line_based else tokenizer.eot_id
    text_model = TextModel(chain_model([*tokenizer.encode("one plus two equals three."), stop], tokenizer.vocab_size),
                           tokenizer, {"one_example_per_line": line_based})
    assert "".join(text_model.stream("one plus two equals")) == " three."  # the tokenizer's own space, kept
    assert "".join(text_model.stream("one plus two equals ")) == "three."  # the prompt's is that space
    assert "".join(text_model.stream("one plus two equals\t")) == "three."


@pytest.mark.parametrize("prompt, tail", [("Once upon a ", " "), ("The end.\n\n", "\n\n"), ("a  ", "  "),
                                          ("Once upon a", ""), ("The end.\n", ""), ("a\t", "")])
def test_a_prompt_ending_where_a_word_would_join_it_is_noted_and_fed_as_asked(prompt: str, tail: str) -> None:
    """GPT-2's BPE encodes 'a ' with a lone ' ', where text has ' time', and 'end.\\n\\n' with '\\n\\n', where text
    has '\\n', '\\n' before a word: the model went on from a token it rarely saw there, without a word."""
    tokenizer = GPT2Tokenizer()
    running = TextModel(build(ModelConfig(vocab_size=tokenizer.vocab_size, layers=1, heads=1, dim=8, block_size=16)),
                        tokenizer, {})
    note = running.prompt_note(prompt)
    said = (f"the prompt ends in {tail!r}, which its tokenizer encodes otherwise where a word follows, as in the text "
            "the model learned: the continuation may be off; drop the trailing whitespace")
    assert note == said * bool(tail)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        running.complete(prompt, max_new_tokens=1, temperature=0)
    assert [str(w.message) for w in caught if w.category is PromptWarning] == [note] * bool(tail)
    assert running.prompt_ids(prompt) == tokenizer.encode(prompt)  # the ids stay those of the prompt asked
    bpe = BPETokenizer.learn(Texts(["Once upon a time.\n\nThe end."]), 270)
    assert TextModel(running.model, bpe, {}).prompt_note(prompt) == note  # the same split pattern
    assert not TextModel(running.model, CharTokenizer.fit(prompt + "x"), {}).prompt_note(prompt)  # no word pieces


def test_a_prompt_past_the_block_is_noted_as_generate_py_notes_it() -> None:
    """The model sees only the prompt's last block_size tokens: generate.py said so, while complete and complete_batch
    answered the cut prompt, its line start dropped, as if it were the whole question, without a word."""
    text_model = calculator_model()  # block_size 24
    prompt = " plus ".join(["one"] * 12) + " equals"  # 24 words after the line start
    said = "the prompt is 25 tokens, past block_size=24: the model sees its last 24"
    for call in (lambda: text_model.complete(prompt), lambda: text_model.complete_batch([prompt, "two plus"])):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert [str(w.message) for w in caught if w.category is PromptWarning] == [said]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptWarning)
        text_model.complete(" plus ".join(["one"] * 11) + " equals two")  # exactly block_size: seen whole


def test_load_gives_the_text_model_of_a_saved_checkpoint(tmp_path: Path) -> None:
    text_model = calculator_model()
    save_model(tmp_path / "model.pt", text_model.model, text_model.tokenizer, text_model.meta)
    loaded = load(tmp_path / "model.pt")
    assert loaded.line_based and [loaded.complete(p) for p in PROMPTS] == [text_model.complete(p) for p in PROMPTS]


def test_a_model_compiled_for_decoding_completes_as_the_eager_one() -> None:
    """generate.py --compile swaps the text model's model for gpt.inference.compiled.compile_for_decoding's. Prompts
    of one token length, so one batch: each batch size compiles a step of its own, for about 10 s
    (tests/test_generation.py compares compiled and eager tokens step by step)."""
    text_model = calculator_model()
    prompts = ["two plus three equals", "six times eight equals"]
    eager = [text_model.complete(p) for p in prompts]
    text_model.model = compile_for_decoding(text_model.model)
    assert text_model.complete_batch(prompts, max_new_tokens=24) == eager
    assert list(text_model.model.steps) == [len(prompts)]
