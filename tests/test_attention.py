"""Every attention variant x every positional encoding it accepts: causal, cache-consistent, equal to
its twins where the maths is equal, and trainable. The loops run over the registries, so a variant is
tested the moment it is registered."""
from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
import torch
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gpt import GPT, ModelConfig, generate
from gpt.data.batches import IGNORE_INDEX
from gpt.data.tasks.datamodule import TaskData
from gpt.model.attention import ATTENTION
from gpt.model.attention.base import Attention
from gpt.model.attention.linear import LinearAttention
from gpt.model.gpt import check_parts, without_foreign_settings
from gpt.model.positional import POSITIONAL
from tests.conftest import assert_close_scaled, build, calculator_data, off_init

BASE = dict(vocab_size=37, layers=2, heads=4, dim=32, block_size=16, window=4, kv_heads=2, kv_latent_dim=12)


def make(attention: str, pos: str = "rope", **overrides: object) -> ModelConfig:
    """BASE as `attention`, less the settings of other variants (BASE's kv_heads under mha)."""
    cfg = without_foreign_settings(ModelConfig(**{**BASE, "attention": attention, "pos": pos, **overrides}))
    check_parts(cfg)
    return cfg


def accepts(attention: str, pos: str) -> bool:
    try:
        make(attention, pos)
    except ValueError:
        return False
    return True


pytestmark = pytest.mark.usefixtures("one_thread")
PAIRS = [(a, p) for a in ATTENTION for p in POSITIONAL if accepts(a, p)]
REFUSED = [(a, p) for a in ATTENTION for p in POSITIONAL if not accepts(a, p)]


def test_refused_combinations_are_the_impossible_ones_with_one_line() -> None:
    # A rotating encoding cannot reach inside torch's own projections; linear attention never forms scores to bias.
    # Read from the encodings' flags, so a new encoding that rotates or biases scores is expected refused there.
    assert set(REFUSED) == ({("torch_mha", p) for p, encoding in POSITIONAL.items() if encoding.rotates}
                            | {("linear", p) for p, encoding in POSITIONAL.items() if encoding.biases_scores})
    assert {("torch_mha", "rope"), ("linear", "alibi")} <= set(REFUSED)
    for attention, pos in REFUSED:
        with pytest.raises(ValueError, match=f"attention={attention}|pos={pos}") as err:
            make(attention, pos)
        assert "\n" not in str(err.value)


def test_a_variant_that_defines_no_from_config_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A subclass of Attention written to the contributor guide without from_config ended every command with
    # "AttributeError: type object ... has no attribute 'from_config'" from deep inside the model's build.
    class Unbuildable(Attention):
        def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            raise AssertionError("never reached: the model is not built")

    monkeypatch.setitem(ATTENTION, "unbuildable", Unbuildable)
    with pytest.raises(NotImplementedError) as err:
        GPT(ModelConfig(vocab_size=5, attention="unbuildable"))
    assert str(err.value) == "attention=unbuildable (Unbuildable) defines no from_config(cfg): add the classmethod " \
                             "that builds it from a ModelConfig, as MultiHeadAttention.from_config does"


@pytest.mark.parametrize("attention, setting, reader", [
    ("mha", {"kv_heads": 4}, "gqa"), ("mqa", {"kv_heads": 2}, "gqa"), ("gqa", {"linear_features": 8}, "linear"),
    ("mha", {"window": 4}, "sliding_window"), ("gqa", {"kv_latent_dim": 8}, "mla"),
    ("sliding_window", {"linear_conv": 0}, "linear"), ("linear", {"window": 8}, "sliding_window")])
def test_a_setting_of_another_variant_is_refused_not_ignored(attention: str, setting: dict, reader: str) -> None:
    # ModelConfig(attention="mha", kv_heads=1) built mha, a key/value head for every query head, and said nothing;
    # so did window=4, kv_latent_dim=8 or linear_conv=0 under any variant but their own.
    (name, value), = setting.items()
    cfg = replace(make(attention), **setting)
    with pytest.raises(ValueError, match=rf"^{name}={value} changes nothing under attention={attention}, which does "
                                         rf"not read it: drop {name}, or pass attention='{reader}', which does$"):
        GPT(cfg)
    assert getattr(without_foreign_settings(cfg), name) is None  # how a model.pt saved with it loads
    assert getattr(GPT(make(reader, **setting)).cfg, name) == value  # the variant that reads it builds with it


@pytest.mark.parametrize("overrides, message", [
    ({"attention": "gqa", "kv_heads": 3}, "kv_heads=3 must divide heads=4"),
    ({"attention": "sliding_window", "window": 0}, "window=0 must be at least 1"),
    ({"attention": "mla", "kv_latent_dim": 0}, "kv_latent_dim=0 must be a positive integer"),
    # 60 + a rotary key of 4 cached a position against mha's 64 keys and values: mla's costs, none of its saving
    ({"attention": "mla", "kv_latent_dim": 60}, r"cache 64 numbers a position, no fewer than the 64 of every head's "
                                                r"keys and values \(2 x dim=32\): .* set model.kv_latent_dim below 60"),
    ({"attention": "torch_mha", "pos": "learned", "qk_norm": True}, "model.qk_norm=false"),
])
def test_bad_variant_parameters_name_the_field(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_parts(without_foreign_settings(ModelConfig(**{**BASE, **overrides})))


@pytest.mark.parametrize("attention, overrides", [("weightless", {}), ("single_head", {}), ("mla", {}),
                                                  ("linear", {"linear_features": 4})])
def test_rope_takes_an_odd_head_width_where_the_variant_rotates_an_even_one(attention: str, overrides: dict) -> None:
    # RoPE required dim/heads even for every variant; these rotate dim, mla's even rotary part, or linear_features,
    # and were refused at dim/heads=3 although they run.
    model = off_init(build(make(attention, dim=12, heads=4, **overrides)))
    idx = torch.randint(0, 37, (2, 16))
    full = model(idx)
    caches = model.new_caches(2)
    pieces = [model(idx[:, :7], caches)] + [model(idx[:, t:t + 1], caches) for t in range(7, 16)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("overrides, message", [
    ({"attention": "mha"}, "attention=mha rotates dim/heads=3: change model.dim or model.heads"),
    ({"attention": "linear"}, "attention=linear rotates dim/heads=3: set model.linear_features to an even width"),
    ({"attention": "linear", "dim": 16, "linear_features": 5},
     "attention=linear rotates linear_features=5: set model.linear_features"),
    ({"attention": "single_head", "dim": 15, "heads": 5}, "attention=single_head rotates dim=15: change model.dim"),
])
def test_rope_names_the_width_each_variant_rotates(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^pos=rope rotates feature pairs, so it needs an even width; {message}"):
        make(**{"dim": 12, "heads": 4, "pos": "rope", **overrides})


@pytest.mark.parametrize("attention, pos", PAIRS)
def test_future_tokens_do_not_change_past_logits(attention: str, pos: str) -> None:
    model = off_init(build(make(attention, pos)))
    idx = torch.randint(0, 37, (2, 16))
    t = 6
    changed = idx.clone()
    changed[:, t + 1:] = (idx[:, t + 1:] + 1 + torch.randint(0, 36, (2, 16 - t - 1))) % 37  # every later token differs
    before, after = model(idx), model(changed)
    torch.testing.assert_close(before[:, :t + 1], after[:, :t + 1])
    assert not torch.allclose(before[:, t + 1:], after[:, t + 1:])


@pytest.mark.parametrize("attention, pos", PAIRS)
def test_cached_logits_match_full_forward(attention: str, pos: str) -> None:
    """A prompt shorter than, as long as, longer than window=4, and as long as block_size, then one token at a time."""
    model = off_init(build(make(attention, pos)))
    idx = torch.randint(0, 37, (2, 16))
    full = model(idx)
    for prefill in (1, 4, 7, 16):
        caches = model.new_caches(2)
        pieces = [model(idx[:, :prefill], caches)] + [model(idx[:, t:t + 1], caches) for t in range(prefill, 16)]
        torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attention, pos", PAIRS)
def test_cached_and_uncached_greedy_tokens_are_identical(attention: str, pos: str) -> None:
    """Prompts shorter than the window, as long as block_size, and longer; decoding runs past both."""
    model = off_init(build(make(attention, pos)))
    for prompt_len in (3, 16, 21):
        idx = torch.randint(0, 37, (2, prompt_len))
        cached = generate(model, idx, 8, temperature=0, use_cache=True)
        assert torch.equal(cached, generate(model, idx, 8, temperature=0, use_cache=False))


@pytest.mark.parametrize("attention", list(ATTENTION))
def test_cached_prompts_run_under_bf16_autocast(attention: str) -> None:
    """Caches are built in the weights' dtype while autocast computes keys in bf16: a prompt past the window, then
    one token, still gives the full forward's logits (to bf16 precision: 3% of the largest logit, the 0.02 this
    allowed at init, where logits stay below 0.7; off init they reach about 6)."""
    model = off_init(build(make(attention, "learned")))
    idx = torch.randint(0, 37, (2, 16))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        full = model(idx).float()
        caches = model.new_caches(2)
        cached = torch.cat([model(idx[:, :15], caches), model(idx[:, 15:], caches)], dim=1).float()
    assert_close_scaled(cached, full, rtol=0.03, atol=0.03)


def mha_state_as(attention: str, state: dict[str, torch.Tensor], heads: int) -> dict[str, torch.Tensor]:
    """`mha`'s state dict rewritten into another variant's parameter layout (same maths)."""
    out = {}
    for name, value in state.items():
        prefix, _, leaf = name.partition(".attn.")
        if not leaf:
            out[name] = value
            continue
        attn = {k.partition(".attn.")[2]: v for k, v in state.items() if k.startswith(prefix + ".attn.")}
        part, _, param = leaf.partition(".")  # ("query", "weight"), ("proj", "bias"), ("q_norm", "weight"), ...
        joined = torch.cat([attn[f"query.{param}"], attn[f"key.{param}"], attn[f"value.{param}"]]) \
            if part == "query" else None
        if attention == "mha_fused" and part == "query":
            out[f"{prefix}.attn.qkv.{param}"] = joined
        elif attention == "torch_mha" and part == "query":
            out[f"{prefix}.attn.mha.in_proj_{param}"] = joined
        elif attention == "torch_mha" and part == "proj":
            out[f"{prefix}.attn.mha.out_proj.{param}"] = value
        elif attention == "mha_wrapper" and part != "proj":
            for i in range(heads):  # head i owns rows i*D:(i+1)*D of each projection; norms are per head already
                out[f"{prefix}.attn.heads.{i}.{leaf}"] = value if "norm" in part else value.chunk(heads)[i]
        elif attention in ("mha_fused", "torch_mha") and part in ("key", "value"):
            continue
        else:
            out[name] = value
    return out


@pytest.mark.parametrize("twin", ["mha_wrapper", "mha_fused", "torch_mha", "gqa", "sliding_window"])
@pytest.mark.parametrize("pos", list(POSITIONAL))
@pytest.mark.parametrize("qk_norm, bias", [(False, False), (True, False), (False, True)])
def test_twins_of_mha_compute_the_same_function(twin: str, pos: str, qk_norm: bool, bias: bool) -> None:
    """gqa with kv_heads == heads and sliding_window with window >= T are mha too, biases and norm gains included."""
    extra = {"kv_heads": 4, "window": 16, "bias": bias}
    if not accepts(twin, pos) or (twin == "torch_mha" and qk_norm):
        pytest.skip(f"{twin} refuses pos={pos} / qk_norm")
    reference = off_init(build(make("mha", pos, qk_norm=qk_norm, bias=bias)))
    model = GPT(make(twin, pos, qk_norm=qk_norm, **extra)).eval()
    model.load_state_dict(mha_state_as(twin, reference.state_dict(), heads=4))
    idx = torch.randint(0, 37, (3, 16))
    torch.testing.assert_close(model(idx), reference(idx), rtol=1e-4, atol=1e-5)


def test_mqa_is_gqa_with_one_key_value_head() -> None:
    gqa = off_init(build(make("gqa", kv_heads=1)))
    mqa = GPT(make("mqa")).eval()
    mqa.load_state_dict(gqa.state_dict())
    idx = torch.randint(0, 37, (2, 16))
    torch.testing.assert_close(mqa(idx), gqa(idx), rtol=0, atol=0)


def test_a_window_shorter_than_the_text_changes_the_function() -> None:
    """The negative control of the window >= T equality: the window really cuts attention."""
    reference = off_init(build(make("mha")))
    windowed = GPT(make("sliding_window", window=4)).eval()
    windowed.load_state_dict(reference.state_dict())
    idx = torch.randint(0, 37, (2, 16))
    torch.testing.assert_close(windowed(idx)[:, :4], reference(idx)[:, :4])
    assert not torch.allclose(windowed(idx)[:, 4:], reference(idx)[:, 4:])


@pytest.mark.parametrize("kernel", ["math", "sdpa"])
@pytest.mark.parametrize("length", [5, 129])
def test_a_window_cut_into_query_blocks_sees_what_its_whole_mask_allows(kernel: str, length: int) -> None:
    """A prompt one past the window (the fused kernel's causal square would see one key too many) and one past a
    query block of 128 (its last block is a single query, whose mask is skipped because its key range is all it
    sees): the outputs equal those with the weights kept, which apply the whole (T, T) window mask."""
    model = off_init(build(make("sliding_window", block_size=256, kernel=kernel)))
    idx = torch.randint(0, 37, (1, length))
    blocked = model(idx)
    for block in model.blocks:
        block.attn.keep_weights = True
    torch.testing.assert_close(blocked, model(idx), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch, max_len, message", [
    (2.5, None, "new_caches(batch=2.5): batch must be an integer of at least 1"),
    (0, None, "new_caches(batch=0): batch must be an integer of at least 1"),
    (1, 0, "new_caches(max_len=0): max_len must be 1..16"),
    (1, 17, "new_caches(max_len=17): max_len must be 1..16"),
])
def test_caches_of_no_batch_or_of_a_length_the_block_cannot_hold_are_refused(batch: float, max_len: int | None,
                                                                              message: str) -> None:
    """new_caches(2.5) failed in torch.empty's TypeError, new_caches(0) was accepted, and max_len=0 read as "not
    given": a cache of the whole block."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        build(make("mha")).new_caches(batch, max_len=max_len)


@pytest.mark.parametrize("attention", list(ATTENTION))
@pytest.mark.parametrize("model_dtype, cache_dtype", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32)])
def test_caches_in_a_dtype_the_model_does_not_compute_in_are_refused_naming_it(attention: str, model_dtype: torch.dtype,
                                                                                cache_dtype: torch.dtype) -> None:
    # Accepted, they failed at the first prompt in torch's own error deep in attention ("Expected query, key, and
    # value to have the same dtype"), which named neither the caches nor the model's dtype.
    model = build(make(attention, pos="learned")).to(model_dtype)
    with pytest.raises(ValueError) as err:
        model.new_caches(1, dtype=cache_dtype)
    assert str(err.value) == f"new_caches(dtype={cache_dtype}): this model computes in {model_dtype}, the dtype its " \
                             f"layers hand their caches: pass dtype={model_dtype} (or leave dtype out), or convert " \
                             f"the model first with model.to({cache_dtype}), or make the caches and run it under " \
                             f"torch.autocast('cpu', dtype={cache_dtype})"


@pytest.mark.parametrize("attention", ["mha", "sliding_window", "mla"])
def test_caches_in_autocasts_dtype_decode_as_those_in_the_models(attention: str) -> None:
    """Under bf16 autocast an fp32 model's layers hand their caches bf16 keys, values or latents, so caches of
    either dtype hold the same numbers and give the same logits (linear attention's state is a running sum, which
    fp32 holds more exactly)."""
    model = off_init(build(make(attention)))
    idx = torch.randint(0, 37, (2, 9))
    logits = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for dtype in (None, torch.bfloat16):
            caches = model.new_caches(2, dtype=dtype)
            model(idx[:, :-1], caches)
            logits.append(model(idx[:, -1:], caches))
    assert caches[0].k.dtype == torch.bfloat16
    assert torch.equal(*logits)


@pytest.mark.parametrize("attention", ["mha", "sliding_window"])
def test_a_cache_shorter_than_asked_overflows_rather_than_attending_to_less(attention: str) -> None:
    """new_caches(max_len=3) with window=4: the window's ring of 3 slots overwrote a position the window still sees
    and gave other logits than the full forward, silently, where a KVCache raises."""
    model = build(make(attention))
    idx = torch.randint(0, 37, (1, 5))
    caches = model.new_caches(1, max_len=3)
    model(idx[:, :3], caches)
    # it was RuntimeError("KV cache overflow: 4 positions > capacity 3"), naming no way on
    with pytest.raises(ValueError, match=r"^these caches hold 3 positions and this call would make them 4: make them "
                                         r"with new_caches\(1, max_len=4\) or more \(leave max_len out for "
                                         r"block_size, the most a model reads\)$"):
        model(idx[:, 3:4], caches)


@pytest.mark.parametrize("attention", list(ATTENTION))
@pytest.mark.parametrize("built, fed", [(2, 1), (1, 2)])
def test_caches_built_for_another_batch_are_refused_naming_both_batches(attention: str, built: int, fed: int) -> None:
    # torch's own errors came from deep in a layer: "mat1 and mat2 shapes cannot be multiplied" feeding one sequence
    # to caches of two, "expanded size ... must match" the reverse; neither named the caches or their fix.
    model = build(make(attention, pos="learned")).eval()
    caches = model.new_caches(built)
    with pytest.raises(ValueError) as err:
        model(torch.zeros(fed, 3, dtype=torch.long), caches)
    assert str(err.value) == f"caches built for a batch of {built} fed token ids of batch {fed}: build caches for " \
                             f"these ids with model.new_caches({fed})"
    assert caches[0].length == 0  # refused before any layer wrote to them


class AllocatedBytes(TorchDispatchMode):
    """Counts the bytes of every new tensor the ops under it return (views and in-place results excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func: torch._ops.OpOverload, types: tuple[type, ...], args: tuple = (),
                           kwargs: dict | None = None) -> object:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        self.bytes += sum(t.untyped_storage().nbytes() for t in tree_leaves(out)
                          if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs)
        return out


def test_a_first_prompt_into_a_window_cache_copies_no_keys() -> None:
    """A window's prompt joined the cache's kept keys and values to its own before attending, also when the cache
    held none: a copy of every key and value of the prompt, in each layer (on an H200 at 64k tokens, 157 MiB more
    prefill peak than a plain forward). A first prompt allocates what the uncached forward does, plus its slots."""
    model = build(make("sliding_window", block_size=256)).eval()
    idx = torch.randint(0, 37, (1, 256))
    one_layer_keys = 256 * BASE["dim"] * 4  # (B, H, T, D) in fp32
    with torch.no_grad():
        model(idx)  # builds what a first call builds once (RoPE's tables), so neither count below holds it
        with AllocatedBytes() as cached:
            model(idx, model.new_caches(1))
        with AllocatedBytes() as plain:
            model(idx)
    ring = sum(c.k.nbytes + c.v.nbytes for c in model.new_caches(1))  # new_caches allocates under the mode too
    assert cached.bytes - ring - plain.bytes < one_layer_keys


@pytest.mark.parametrize("attention, held", [("gqa", (2, 15)), ("mqa", (1, 15)), ("sliding_window", (4, 4)),
                                              ("mla", (1, 15))])
def test_caches_hold_only_what_the_variant_promises(attention: str, held: tuple[int, int]) -> None:
    """Key/value heads and positions held after 15 tokens (a window of 4 keeps a ring of 4)."""
    model = build(make(attention))
    caches = model.new_caches(1)
    model(torch.randint(0, 37, (1, 15)), caches)
    k, v = caches[0].k, caches[0].v
    assert (k.shape[1], min(k.shape[2], caches[0].length)) == held
    if attention == "mla":  # the latent and one rotary key, not heads x head_dim keys and values
        assert (k.shape[-1], v.shape[-1]) == (BASE["kv_latent_dim"] + model.blocks[0].attn.rope_dim, 0)


@pytest.mark.parametrize("attention, pos", [(a, p) for a, p in PAIRS if p in ("learned", "alibi")])
def test_every_variant_gives_causal_maps_whose_rows_sum_to_one(attention: str, pos: str) -> None:
    """Variants that never form weights compute them the explicit way when asked (linear: its implied ones)."""
    model = build(make(attention, pos))
    idx = torch.randint(0, 37, (1, 9))
    for weights in model.attention_maps(idx):
        assert weights.shape[-2:] == (9, 9)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
        assert torch.all(weights.triu(diagonal=1) == 0)
        if attention == "sliding_window":
            assert torch.all(weights.tril(diagonal=-BASE["window"]) == 0)


@pytest.mark.parametrize("twin, pos", [("mha", "rope"), ("mha", "alibi"), ("torch_mha", "learned"),
                                       ("torch_mha", "alibi")])
def test_weights_of_fused_kernels_are_mhas_and_keeping_them_changes_no_output(twin: str, pos: str) -> None:
    """The fused kernel's weights, formed the written-out way when kept, and torch's own per-head weights are the
    maths' weights, and the model gives the same logits while it keeps them (so the maps describe the function
    that runs)."""
    reference = off_init(build(make("mha", pos, kernel="math")))
    model = GPT(make(twin, pos, kernel="sdpa")).eval()
    model.load_state_dict(mha_state_as(twin, reference.state_dict(), heads=4))
    idx = torch.randint(0, 37, (2, 12))
    for got, expected in zip(model.attention_maps(idx), reference.attention_maps(idx)):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
    fused = model(idx)
    for block in model.blocks:
        block.attn.keep_weights = True
    torch.testing.assert_close(model(idx), fused, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_linear_attentions_implied_weights_times_values_are_its_output(pos: str) -> None:
    """The kept weights are exactly what mixes the values; without RoPE they are a causal distribution."""
    torch.manual_seed(0)
    attn = LinearAttention(32, 4).eval()
    positional = POSITIONAL[pos].from_config(make("linear", pos))
    x = torch.randn(2, 10, 32)
    attn.keep_weights = True
    out = attn(x, positional)
    v = attn.project(x)[2]  # (B, H, T, D)
    mixed = (attn.weights @ v).transpose(1, 2).reshape(2, 10, 32)  # (B, H, T, D) -> (B, T, C)
    torch.testing.assert_close(attn.proj(mixed), out, rtol=1e-4, atol=1e-5)
    if pos == "learned":
        assert torch.all(attn.weights >= 0)
        torch.testing.assert_close(attn.weights.sum(-1), torch.ones(2, 4, 10))
    else:
        assert not torch.allclose(attn.weights.sum(-1), torch.ones(2, 4, 10))  # the rotated numerator


@pytest.fixture(scope="module")
def calculator() -> TaskData:
    data = calculator_data(batch_size=64)
    data.setup("fit")
    return data


@pytest.mark.parametrize("attention", list(ATTENTION))
def test_every_variant_learns_the_calculator(attention: str, calculator: TaskData) -> None:
    """40 AdamW steps take the loss below the unigram entropy of the answers' words: the model uses context."""
    torch.manual_seed(0)
    cfg = make(attention, "learned" if attention == "torch_mha" else "rope", vocab_size=calculator.vocab_size,
               block_size=calculator.max_tokens)
    model = GPT(cfg).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batches = iter(calculator.train_dataloader())
    losses = []
    for _ in range(40):
        inputs, targets = next(batches)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    targets = calculator.train_set.targets
    counts = torch.bincount(targets[targets != IGNORE_INDEX], minlength=calculator.vocab_size).float()
    p = counts[counts > 0] / counts.sum()
    unigram = -(p * p.log()).sum().item()
    assert losses[0] > math.log(calculator.vocab_size) - 0.5  # it starts near uniform guessing
    assert sum(losses[-5:]) / 5 < unigram, (losses[-5:], unigram)
