import dataclasses
import itertools
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from gpt import ModelConfig, generate
from gpt.inference.compiled import compile_for_decoding
from gpt.inference.generation import sample_next, stream
from gpt.model.attention import ATTENTION
from gpt.model.attention.base import KVCache
from gpt.model.gpt import without_foreign_settings
from gpt.model.positional import POSITIONAL
from tests.conftest import build, off_init


@pytest.mark.parametrize("prompt_len, new", [(3, 10), (16, 5), (25, 30)])
def test_cached_and_uncached_greedy_tokens_are_identical(tiny_cfg: ModelConfig, prompt_len: int, new: int) -> None:
    """Prompts shorter than, equal to and longer than block_size; decoding runs past block_size."""
    model = off_init(build(tiny_cfg))
    idx = torch.randint(0, tiny_cfg.vocab_size, (2, prompt_len))
    cached = generate(model, idx, new, temperature=0, use_cache=True)
    uncached = generate(model, idx, new, temperature=0, use_cache=False)
    assert cached.shape == (2, prompt_len + new)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("overrides", [{}, {"attention": "sliding_window", "pos": "alibi", "window": 4},
                                       {"attention": "gqa", "kv_heads": 1}, {"attention": "mla", "pos": "rope"},
                                       {"attention": "linear", "pos": "rope"}])
def test_compiled_decoding_chooses_the_eager_tokens(tiny_cfg: ModelConfig, overrides: dict) -> None:
    """generate.py --compile: the compiled model decodes token for token as the eager one, through the
    single-token steps (written-out attention with a window mask, a score bias, grouped keys), the step that
    fills the cache and the refill once the window slides past block_size; MLA's step decodes from its latents,
    linear attention's prompt runs chunkwise."""
    model = off_init(build(dataclasses.replace(tiny_cfg, **overrides)))
    idx = torch.randint(0, tiny_cfg.vocab_size, (2, 3))
    eager = generate(model, idx, tiny_cfg.block_size + 4, temperature=0)
    torch._dynamo.reset()  # graphs compiled for other models here would count towards the recompile limit
    decoding = compile_for_decoding(model)
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):  # never fall back to eager unseen
        compiled = generate(decoding, idx, tiny_cfg.block_size + 4, temperature=0)
    assert torch.equal(compiled, eager)
    # The softmax variants' KV caches decode through the step AOTInductor compiled for batch 2; a window's
    # ring and linear attention's state through torch.compile.
    assert list(decoding.steps) == ([] if overrides.get("attention") in ("sliding_window", "linear") else [2])


def test_cached_logits_match_full_forward(tiny_cfg: ModelConfig) -> None:
    model = off_init(build(tiny_cfg))
    idx = torch.randint(0, tiny_cfg.vocab_size, (2, 12))
    full = model(idx)
    caches = model.new_caches(2)
    pieces = [model(idx[:, :5], caches)] + [model(idx[:, t:t + 1], caches) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)


def test_greedy_is_argmax_and_top_k_one_is_greedy() -> None:
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.9], [3.0, 0.0, 0.0, 0.0]])
    assert sample_next(logits, temperature=0).flatten().tolist() == [1, 0]
    assert sample_next(logits, temperature=1.0, top_k=1).flatten().tolist() == [1, 0]


def test_top_p_keeps_only_the_nucleus() -> None:
    # probabilities ~ [0.64, 0.24, 0.09, 0.03]: top_p=0.7 keeps the first two only
    logits = torch.log(torch.tensor([[0.64, 0.24, 0.09, 0.03]])).repeat(2000, 1)
    drawn = sample_next(logits, temperature=1.0, top_p=0.7, generator=torch.Generator().manual_seed(0))
    assert set(drawn.flatten().tolist()) == {0, 1}
    always_first = sample_next(logits, temperature=1.0, top_p=0.1, generator=torch.Generator().manual_seed(0))
    assert set(always_first.flatten().tolist()) == {0}


def test_sampling_is_reproducible_by_seed(tiny_cfg: ModelConfig) -> None:
    model = build(tiny_cfg)
    idx = torch.zeros(1, 1, dtype=torch.long)
    runs = [generate(model, idx, 20, temperature=1.0, generator=torch.Generator().manual_seed(s)) for s in (1, 1, 2)]
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])


def test_stop_token_ends_generation(tiny_cfg: ModelConfig) -> None:
    model = build(tiny_cfg)
    idx = torch.zeros(1, 3, dtype=torch.long)
    first = generate(model, idx, 1, temperature=0)[0, -1].item()
    out = generate(model, idx, 10, temperature=0, stop_token=first)
    assert out.shape == (1, 4)


def test_greedy_decoding_of_a_model_in_training_mode_is_as_in_evaluation_and_leaves_it_training(
        tiny_cfg: ModelConfig) -> None:
    """gpt.generate(model, ids, temperature=0) on a model left in training mode with dropout gave another "greedy"
    answer on each call, where the text API decoded in evaluation mode."""
    model = off_init(build(dataclasses.replace(tiny_cfg, dropout=0.5)))
    idx = torch.randint(0, tiny_cfg.vocab_size, (2, 3))
    greedy = generate(model, idx, 6, temperature=0)
    model.train()
    for _ in range(3):
        assert torch.equal(generate(model, idx, 6, temperature=0), greedy)
        assert model.training


class ScriptedModel(torch.nn.Module):
    """Stands in for a GPT in `stream`: at its n-th call, row b's last logits put all the weight on script[b][n]."""

    def __init__(self, script: list[list[int]], vocab_size: int = 4) -> None:
        super().__init__()
        self.script, self.calls = script, 0
        self.cfg = SimpleNamespace(vocab_size=vocab_size, block_size=64)

    def forward(self, idx: torch.Tensor, caches: None) -> torch.Tensor:
        logits = torch.zeros(idx.shape[0], idx.shape[1], self.cfg.vocab_size)
        for row, tokens in enumerate(self.script):
            logits[row, -1, tokens[self.calls]] = 10.0
        self.calls += 1
        return logits


def test_a_batch_stops_once_every_row_has_met_the_stop_token_at_any_step() -> None:
    """Row 0 says the stop token (0) first, row 1 two steps later: decoding ends there, each row having stopped once,
    though no single step had both rows say it."""
    model = ScriptedModel([[0, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 1]])
    out = generate(model, torch.ones(2, 1, dtype=torch.long), 6, temperature=0, use_cache=False, stop_token=0)
    assert out[:, 1:].tolist() == [[0, 1, 1], [1, 1, 0]]


@pytest.mark.parametrize("kwargs, message", [
    ({"top_p": 1.5}, "top_p=1.5 must be in"),
    ({"max_new_tokens": -1}, "max_new_tokens=-1 must be 0 or more"),
    ({"temperature": -0.5}, "temperature=-0.5 must be a finite number >= 0"),
    ({"temperature": float("nan")}, "temperature=nan must be a finite number >= 0"),
    ({"top_k": 0}, "top_k=0 must be at least 1"),
    # Types: these failed in Python or torch, naming neither the setting nor what it takes.
    ({"max_new_tokens": None}, "max_new_tokens=None must be an integer$"),  # '<' not supported between NoneType ...
    ({"max_new_tokens": 2.5}, "max_new_tokens=2.5 must be an integer$"),  # 'float' object cannot be interpreted ...
    ({"max_new_tokens": True}, "max_new_tokens=True must be an integer$"),
    ({"top_k": 2.5}, "top_k=2.5 must be an integer or None$"),  # torch.topk(): argument 'k' must be int
    ({"temperature": "0.8"}, "temperature='0.8' must be a number$"),
    ({"top_p": "0.9"}, "top_p='0.9' must be a number or None$"),
    # gpt.generate has no corpus and no default of 0: the refusal said "(the default on one-example-per-line corpora)"
    ({"temperature": 0, "top_k": 5}, r"^top_k=5 narrows sampling, but temperature=0 decodes greedily: pass a "
                                     r"temperature > 0, such as 0.8$"),
    ({"temperature": 0, "top_p": 0.9}, r"^top_p=0.9 narrows sampling, but temperature=0 decodes greedily: pass a "
                                       r"temperature > 0, such as 0.8$"),
])
def test_bad_sampling_settings_are_refused(tiny_cfg: ModelConfig, kwargs: dict, message: str) -> None:
    args = {"max_new_tokens": 5, **kwargs}
    with pytest.raises(ValueError, match=message):
        list(stream(build(tiny_cfg), torch.zeros(1, 1, dtype=torch.long), **args))


@pytest.mark.parametrize("keeps_all", [{"top_p": 1.0}, {"top_k": 37}, {"top_k": 100}, {"top_k": 20, "vocab_size": 20}])
def test_a_top_k_or_top_p_that_keeps_every_token_is_taken_under_greedy_decoding(tiny_cfg: ModelConfig,
                                                                                keeps_all: dict) -> None:
    """top_p=1 and a top_k of every choosable id narrow nothing: greedy decoding takes them, choosing as without."""
    model, idx = off_init(build(tiny_cfg)), torch.randint(0, tiny_cfg.vocab_size, (2, 3))
    vocab_size = keeps_all.get("vocab_size")
    assert torch.equal(generate(model, idx, 5, temperature=0, **keeps_all),
                       generate(model, idx, 5, temperature=0, vocab_size=vocab_size))


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_a_generator_that_is_not_one_or_is_on_another_device_is_refused(tiny_cfg: ModelConfig,
                                                                         temperature: float) -> None:
    # generator=1 was torch's TypeError when sampling and ignored unread when greedy; a CPU generator beside a CUDA
    # model was torch's "Expected a 'cuda' device type for generator" (the meta device stands in for CUDA here).
    model, idx = build(tiny_cfg).eval(), torch.zeros(1, 1, dtype=torch.long)
    with pytest.raises(ValueError, match=r"^generator=1 must be a torch\.Generator: for a seed, pass "
                                         r"generator=torch\.Generator\(device='cpu'\)\.manual_seed\(seed\)$"):
        generate(model, idx, 2, temperature=temperature, generator=1)
    with pytest.raises(ValueError, match=r"^the generator is on cpu and the model on meta: pass a "
                                         r"torch\.Generator\(device='meta'\)$"):
        generate(model.to("meta"), idx, 2, temperature=temperature, generator=torch.Generator())


def test_numpy_scalars_are_settings_as_python_numbers_are(tiny_cfg: ModelConfig) -> None:
    # The type checks take numbers as Python's arithmetic and torch do: a length counted with numpy still decodes.
    model, idx = build(tiny_cfg).eval(), torch.zeros(1, 1, dtype=torch.long)
    drawn = [generate(model, idx, n, temperature=t, top_k=k, top_p=p, generator=torch.Generator().manual_seed(0))
             for n, t, k, p in ((4, 0.5, 3, 0.9), (np.int64(4), np.float32(0.5), np.int64(3), np.float64(0.9)))]
    assert torch.equal(*drawn)


def test_a_vocab_size_outside_the_model_is_refused(tiny_cfg: ModelConfig) -> None:
    """vocab_size=0 failed in torch's amax over no logits; one past the model's vocabulary was ignored silently."""
    model = build(tiny_cfg)
    for vocab_size in (0, tiny_cfg.vocab_size + 1):
        with pytest.raises(ValueError, match=f"vocab_size={vocab_size} must be in 1..{tiny_cfg.vocab_size}"):
            generate(model, torch.zeros(1, 1, dtype=torch.long), 3, vocab_size=vocab_size)


def test_a_stop_token_no_id_can_be_is_refused(tiny_cfg: ModelConfig) -> None:
    """A stop token past the ids decoding chooses among was never said: decoding ran to its length, silently."""
    model, idx = build(tiny_cfg), torch.zeros(1, 1, dtype=torch.long)
    for stop, vocab_size in ((tiny_cfg.vocab_size, None), (-1, None), (5, 5)):
        choosable = vocab_size or tiny_cfg.vocab_size
        with pytest.raises(ValueError, match=f"^stop_token={stop} is no id this model can choose "
                                             f"\\(0..{choosable - 1}\\)"):
            generate(model, idx, 3, temperature=0, stop_token=stop, vocab_size=vocab_size)
    with pytest.raises(ValueError, match="^stop_token='\\\\n' must be an integer or None$"):
        generate(model, idx, 3, temperature=0, stop_token="\n")


def test_ids_outside_the_vocabulary_are_one_line(tiny_cfg: ModelConfig) -> None:
    """Ids from another tokenizer ended in torch's 'IndexError: index out of range in self' inside the embedding."""
    model = build(tiny_cfg)
    for bad in (tiny_cfg.vocab_size, -1):
        with pytest.raises(ValueError, match=f"outside this model's vocabulary of {tiny_cfg.vocab_size}"):
            generate(model, torch.tensor([[0, bad]]), 3, temperature=0)


def test_a_step_that_does_not_export_decodes_through_torch_compile(tiny_cfg: ModelConfig,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Export may refuse a variant's code (none of this project's is known to, above; a new variant's or another
    torch's may): the step then goes through torch.compile, saying so once, and still chooses the eager tokens."""
    model = off_init(build(tiny_cfg))
    idx = torch.randint(0, tiny_cfg.vocab_size, (1, 3))
    eager = generate(model, idx, 8, temperature=0)

    def refuse(*args: object, **kwargs: object) -> None:
        raise torch._dynamo.exc.UserError(torch._dynamo.exc.UserErrorType.INVALID_INPUT, "refused")

    monkeypatch.setattr(torch.export, "export", refuse)
    torch._dynamo.reset()
    decoding = compile_for_decoding(model)
    with pytest.warns(UserWarning, match=r"did not export \(UserError\); compiling it with torch.compile"):
        assert torch.equal(generate(decoding, idx, 8, temperature=0), eager)
    assert decoding.steps == {1: None}


def test_every_variants_kv_cached_step_exports(tiny_cfg: ModelConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/generation.md says no variant is known whose step falls back to torch.compile: every attention with a
    plain KV cache, under every positional encoding it takes, exports (torch_mha with ALiBi, once named as one that
    did not, does). The ahead-of-time compile itself is stubbed out: only whether the step exports is asked."""
    monkeypatch.setattr("torch._inductor.aoti_compile_and_package", lambda exported, **kwargs: exported)
    monkeypatch.setattr("torch._inductor.aoti_load_package",
                        lambda package: SimpleNamespace(loader=SimpleNamespace(boxed_run=package)))
    exported = []
    for attention, pos in itertools.product(ATTENTION, POSITIONAL):
        try:
            cfg = without_foreign_settings(dataclasses.replace(tiny_cfg, layers=1, attention=attention, pos=pos,
                                                               kv_heads=1, kv_latent_dim=8, window=4))
            model = build(cfg)
        except ValueError:  # a pair that cannot work (torch_mha with rope)
            continue
        caches = model.new_caches(1)
        if any(type(cache) is not KVCache for cache in caches):  # a window's ring, linear state: torch.compile
            continue
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.filterwarnings("error", message="the decode step did not export")
            assert compile_for_decoding(model)._compile_step(1, caches) is not None, (attention, pos)
        exported.append((attention, pos))
    assert ("torch_mha", "alibi") in exported and ("mla", "rope") in exported


def test_a_rope_step_exports_after_a_prompt_shorter_than_half_the_block(tiny_cfg: ModelConfig,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """RoPE's angle table, built for twice a 3-token prompt (256 positions at least), ended inside the step's
    range of lengths (1 to 298 here): export refused that guard, and a rope model with a block over 258 positions
    decoded a short prompt through the slower torch.compile. The ahead-of-time compile itself is stubbed out: only
    whether the step exports is asked."""
    monkeypatch.setattr("torch._inductor.aoti_compile_and_package", lambda exported, **kwargs: exported)
    monkeypatch.setattr("torch._inductor.aoti_load_package",
                        lambda package: SimpleNamespace(loader=SimpleNamespace(boxed_run=package)))
    model = build(dataclasses.replace(tiny_cfg, pos="rope", block_size=300))
    caches = model.new_caches(1)
    decoding = compile_for_decoding(model)
    torch._dynamo.reset()
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.filterwarnings("error", message="the decode step did not export")
        model(torch.zeros(1, 3, dtype=torch.long), caches)
        assert decoding._compile_step(1, caches) is not None
