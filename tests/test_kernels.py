"""What each variant's long-context machinery computes is what the plain maths computes: the two kernels, prompts cut
into blocks of queries, a window's bands and ring, MLA's absorbed decode, chunkwise linear attention, shared
key/value heads never repeated, and cache bytes as each variant's formula says. Loops run over the registries."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn import functional as F
from torch.profiler import profile

import gpt.model.attention.base
import gpt.model.attention.kernels as kernels
import gpt.model.attention.linear
import gpt.model.attention.sparse
from gpt import GPT, ModelConfig
from gpt.inference.depth import tensor_bytes
from gpt.model.attention import ATTENTION
from gpt.model.attention.base import Attention
from gpt.model.attention.kernels import KERNELS
from gpt.model.attention.linear import LinearAttention
from gpt.model.attention.torch_mha import TorchMultiheadAttention
from gpt.model.gpt import settings_read
from gpt.model.positional import Positional
from tests.conftest import assert_close_scaled, build, off_init
from tests.test_attention import BASE, PAIRS, make

SOFTMAX = [name for name, cls in ATTENTION.items() if issubclass(cls, Attention)
           and cls not in (LinearAttention, TorchMultiheadAttention)]


pytestmark = pytest.mark.usefixtures("one_thread")


def twin(cfg: ModelConfig, **changes: object) -> tuple[GPT, GPT]:
    """A model and the same weights under changed settings (another kernel, ...)."""
    model = off_init(build(cfg))
    other = GPT(ModelConfig(**{**cfg.to_dict(), **changes})).eval()
    other.load_state_dict(model.state_dict())
    return model, other


def prefill_then_decode(model: GPT, idx: torch.Tensor, prefill: int) -> torch.Tensor:
    """Logits of a cached prompt of `prefill` tokens, then of one token at a time: (B, T, V)."""
    caches = model.new_caches(idx.shape[0])
    pieces = [model(idx[:, :prefill], caches)] + [model(idx[:, t:t + 1], caches) for t in range(prefill, idx.shape[1])]
    return torch.cat(pieces, dim=1)


@pytest.mark.parametrize("attention, pos", [(a, p) for a, p in PAIRS if a in SOFTMAX])
def test_math_and_sdpa_kernels_compute_the_same_function(attention: str, pos: str) -> None:
    """Whole sequences, a cached prompt longer than the window and every decode step after it, with dropout off."""
    math, sdpa = twin(make(attention, pos, kernel="math"), kernel="sdpa")
    idx = torch.randint(0, 37, (2, 16))
    torch.testing.assert_close(sdpa(idx), math(idx), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(prefill_then_decode(sdpa, idx, 7), prefill_then_decode(math, idx, 7),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("attention", SOFTMAX)
@pytest.mark.parametrize("pos", ["rope", "alibi"])
def test_a_prompt_cut_into_blocks_of_queries_equals_one_block(attention: str, pos: str, kernel: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A score budget of 48 cuts 16 queries (x 2 rows x 4 heads) into blocks of one or a few; with a cache too."""
    model = off_init(build(make(attention, pos, kernel=kernel)))
    idx = torch.randint(0, 37, (2, 16))
    whole, cached = model(idx), prefill_then_decode(model, idx, 16)
    monkeypatch.setattr(gpt.model.attention.base, "SCORE_BUDGET", 48)
    torch.testing.assert_close(model(idx), whole, rtol=1e-4, atol=1e-5)
    caches = model.new_caches(2)
    pieces = torch.cat([model(idx[:, :5], caches), model(idx[:, 5:], caches)], dim=1)  # a prompt after a prompt
    torch.testing.assert_close(pieces, cached, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("pos", ["rope", "alibi"])
def test_window_bands_and_ring_equal_the_full_mask_at_every_step(pos: str, kernel: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A window of 3 over 16 tokens: blocks of queries against their band of keys, and a ring of 3 slots written in
    place (never reallocated) for every step past the window, give what the window mask over every key gives."""
    model = off_init(build(make("sliding_window", pos, kernel=kernel, window=3)))
    idx = torch.randint(0, 37, (2, 16))
    full = model(idx)
    layer = type(model.blocks[0].attn)
    with monkeypatch.context() as patch:  # one block of every query against every key: the plain window mask
        patch.setattr(layer, "query_block", lambda self, batch_heads, q_len, k_len: q_len)
        patch.setattr(layer, "key_range", lambda self, first, last: (0, last + 1))
        torch.testing.assert_close(model(idx), full, rtol=1e-4, atol=1e-5)
    monkeypatch.setattr(layer, "query_block", lambda self, batch_heads, q_len, k_len: 2)  # bands of 2 queries
    torch.testing.assert_close(model(idx), full, rtol=1e-4, atol=1e-5)
    caches = model.new_caches(2)
    buffers = caches[0].k.data_ptr(), caches[0].k.shape
    for t in range(16):
        torch.testing.assert_close(model(idx[:, t:t + 1], caches)[:, 0], full[:, t], rtol=1e-4, atol=1e-5)
        assert (caches[0].k.data_ptr(), caches[0].k.shape) == buffers  # the same 3 slots, written in place


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("pos", ["rope", "alibi", "learned"])
def test_window_chunks_batched_into_one_call_equal_the_blocks(pos: str, kernel: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's prefill (chunks of 5 queries batched against their 10 keys, the last chunk padded), made to run
    here: the blocks' outputs and gradients, whole and after a cached prompt whose keys start in the ring; the
    written-out kernel in groups of chunks under a small score budget too."""
    model = off_init(build(make("sliding_window", pos, kernel=kernel, window=4, block_size=32)))
    idx = torch.randint(0, 37, (2, 23))
    blocks, blocks_cached = model(idx), prefill_then_decode(model, idx, 23)
    blocks_grads = torch.autograd.grad(blocks.square().sum(), list(model.parameters()))
    caches = model.new_caches(2)
    model(idx[:, :6], caches)
    blocks_after = model(idx[:, 6:], caches)
    layer = type(model.blocks[0].attn)
    monkeypatch.setattr(gpt.model.attention.sparse, "MIN_CHUNK", 5)
    calls = []
    monkeypatch.setattr(layer, "chunks_at_once", lambda self, q, c: calls.append(c) or q.shape[2] > 2 * c)
    monkeypatch.setattr(gpt.model.attention.base, "SCORE_BUDGET", 2 * 4 * 5 * 10 * 2)  # two chunks a call
    chunked = model(idx)
    assert calls and set(calls) == {5}
    torch.testing.assert_close(chunked, blocks, rtol=1e-4, atol=1e-5)
    for grad, expected in zip(torch.autograd.grad(chunked.square().sum(), list(model.parameters())), blocks_grads):
        # Off init gradients reach hundreds and float32 rounding grows with them, to 1.7e-6 of the largest here.
        assert_close_scaled(grad, expected, atol=5e-6)
    torch.testing.assert_close(prefill_then_decode(model, idx, 23), blocks_cached, rtol=1e-4, atol=1e-5)
    caches = model.new_caches(2)
    model(idx[:, :6], caches)
    torch.testing.assert_close(model(idx[:, 6:], caches), blocks_after, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_a_prompt_after_cached_ones_that_fills_the_ring_sees_what_the_whole_sees(kernel: str) -> None:
    """A window of 4 fed 3 tokens at a time: the second prompt's keys join the 3 kept before the ring has wrapped,
    when the kept keys are views of slots that this prompt's own positions are written into."""
    model = off_init(build(make("sliding_window", "learned", kernel=kernel, window=4)))
    idx = torch.randint(0, 37, (2, 16))
    caches = model.new_caches(2)
    chunks = torch.cat([model(idx[:, t:t + 3], caches) for t in range(0, 16, 3)], dim=1)
    torch.testing.assert_close(chunks, model(idx), rtol=1e-4, atol=1e-5)


def test_window_chunks_that_see_too_far_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: chunks whose band mask forgets the window (every earlier key of the two chunks)
    differ from the blocks."""
    model = off_init(build(make("sliding_window", "rope", kernel="math", window=4, block_size=32)))
    idx = torch.randint(0, 37, (2, 23))
    blocks = model(idx)
    layer = type(model.blocks[0].attn)
    monkeypatch.setattr(gpt.model.attention.sparse, "MIN_CHUNK", 5)
    monkeypatch.setattr(layer, "chunks_at_once", lambda self, q, c: True)
    window_mask = layer.mask
    monkeypatch.setattr(layer, "mask", lambda self, q_len, k_len, offset, device: (
        gpt.model.attention.base.causal_mask(q_len, k_len, offset, device) if k_len == 2 * q_len
        else window_mask(self, q_len, k_len, offset, device)))
    assert not torch.allclose(model(idx), blocks, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pos", ["rope", "alibi", "learned"])
@pytest.mark.parametrize("bias", [False, True])
def test_absorbed_mla_decoding_equals_rebuilding_keys_and_values(pos: str, bias: bool) -> None:
    """A decode step scored against the cached latents (queries mapped into the latent space, values mapped out
    after) gives what rebuilding every head's keys and values gives, biases included."""
    model = off_init(build(make("mla", pos, bias=bias, kernel="math")))
    idx = torch.randint(0, 37, (2, 16))
    absorbed = prefill_then_decode(model, idx, 5)
    for block in model.blocks:
        block.attn.absorbs = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warning of rebuilding, which is what this reference does
        rebuilt = prefill_then_decode(model, idx, 5)
    torch.testing.assert_close(absorbed, rebuilt, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(absorbed, model(idx), rtol=1e-4, atol=1e-5)


def test_mla_with_qk_norm_rebuilds_when_decoding_and_says_so_once() -> None:
    model = off_init(build(make("mla", qk_norm=True)))
    idx = torch.randint(0, 37, (1, 8))
    with pytest.warns(UserWarning, match="model.qk_norm=false to decode from the latents") as caught:
        torch.testing.assert_close(prefill_then_decode(model, idx, 3), model(idx), rtol=1e-4, atol=1e-5)
    assert len({str(w.message) for w in caught}) == 1


@pytest.mark.parametrize("features", [None, 6, 12])
def test_chunkwise_linear_attention_equals_its_recurrence(features: int | None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 3 over 10 positions (the last chunk padded), with queries and keys of `features` per head."""
    monkeypatch.setattr(gpt.model.attention.linear, "CHUNK", 3)
    torch.manual_seed(0)
    attn = LinearAttention(32, 4, features=features).eval()
    F_ = features or 8
    x = torch.randn(2, 10, 32)
    q, k, v = attn.project(x)  # (B, H, T, F), (B, H, T, F), (B, H, T, D)
    q, k = F.elu(q) + 1, F.elu(k) + 1
    state, normaliser, outputs = torch.zeros(2, 4, F_, 8), torch.zeros(2, 4, F_), []
    for t in range(10):
        state = state + k[:, :, t, :, None] * v[:, :, t, None, :]  # += phi(k_t) v_t^T
        normaliser = normaliser + k[:, :, t]
        outputs.append((q[:, :, t, None, :] @ state).squeeze(2) / (q[:, :, t] * normaliser).sum(-1, keepdim=True))
    recurrent = attn.proj(torch.stack(outputs, dim=2).transpose(1, 2).reshape(2, 10, 32))  # (B, H, T, D) -> (B, T, C)
    torch.testing.assert_close(attn(x, Positional()), recurrent, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("conv", [0, 3])
@pytest.mark.parametrize("pos", ["rope", "none"])
def test_linear_features_size_the_state_and_keep_it_causal_and_cache_consistent(pos: str, conv: int) -> None:
    """The state is features x head width per head, plus the last conv - 1 inputs the short convolution reads;
    with it, a prompt then decode steps still equal the whole sequence at once."""
    model = off_init(build(make("linear", pos, linear_features=4, linear_conv=conv)))
    caches = model.new_caches(3)
    assert caches[0].kv.shape == (3, 4, 4, 8)  # (B, H, features, head width)
    assert caches[0].recent.shape == (3, max(conv - 1, 0), 32)  # (B, width - 1, C)
    assert tensor_bytes(caches) == model.cache_bytes(3, 16) == 2 * 3 * (4 * 4 * (8 + 1) + max(conv - 1, 0) * 32) * 4
    idx = torch.randint(0, 37, (2, 16))
    full = model(idx)
    changed = idx.clone()
    changed[:, 9:] = (idx[:, 9:] + 1) % 37
    torch.testing.assert_close(model(changed)[:, :9], full[:, :9])
    torch.testing.assert_close(prefill_then_decode(model, idx, 5), full, rtol=1e-4, atol=1e-5)


def test_linear_conv_mixes_each_position_with_the_width_before_it_and_nothing_else() -> None:
    """A convolution of width 3: a change at position 2 moves the convolved input at positions 2, 3 and 4 only."""
    attn = LinearAttention(32, 4, conv=3).eval()
    x = torch.randn(1, 6, 32)
    changed = x.clone()
    changed[:, 2] += 1.0
    moved = (attn.convolve(changed, None) - attn.convolve(x, None)).abs().amax(-1)[0]  # (T,)
    assert moved.nonzero().flatten().tolist() == [2, 3, 4]


@pytest.mark.parametrize("conv", [-1, 1])
def test_linear_conv_of_no_width_is_refused(conv: int) -> None:
    with pytest.raises(ValueError, match="model.linear_conv"):
        build(make("linear", "rope", linear_conv=conv))


def repeated_heads(gqa: GPT, heads: int) -> GPT:
    """`mha` whose key/value projections are the grouped model's, each repeated for its query heads."""
    mha = GPT(ModelConfig(**{**gqa.cfg.to_dict(), "attention": "mha", "kv_heads": None})).eval()
    state = dict(gqa.state_dict())
    for name, value in gqa.state_dict().items():
        if name.endswith(("attn.key.weight", "attn.value.weight")):
            kv_heads = value.shape[0] // (gqa.cfg.dim // heads)
            state[name] = value.view(kv_heads, -1, value.shape[1]).repeat_interleave(heads // kv_heads, 0).flatten(0, 1)
    mha.load_state_dict(state)
    return mha


@pytest.mark.parametrize("batch, kv_heads, keys, slices", [(1, 1, 2048, 2), (2, 1, 3001, 3), (1, 2, 4100, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_keys_cut_into_slices_give_what_all_the_keys_give(batch: int, kv_heads: int, keys: int, slices: int,
                                                          dtype: torch.dtype) -> None:
    """Flash-decoding's merge: each slice's output weighted by its log-sum-exp's share (the keys left over by equal
    slices, 3001 = 3 x 1000 + 1, in a call of their own)."""
    q, k, v = (torch.randn(batch, kv_heads, rows, 16, dtype=dtype) for rows in (8, keys, keys))
    with torch.no_grad():
        sliced = kernels.sliced_keys_attention(q, k, v, 0.3, slices)
    whole = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.3)
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-3}
    torch.testing.assert_close(sliced.float(), whole, **tolerance)


@pytest.mark.parametrize("attention, kv_heads, slices", [("mqa", 1, 2), ("gqa", 2, None)])
def test_a_decode_step_with_threads_left_idle_cuts_its_keys_into_slices(attention: str, kv_heads: int,
                                                                        slices: int | None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """On 2 threads a step of mqa at batch 1 (one (sequence, key/value head) pair, which torch's CPU kernel gives one
    thread) cuts its 2,049 keys in 2 slices, and its logits are those of the uncut kernel on one thread; gqa's two
    pairs fill both threads, uncut. Gradients never take the private kernel."""
    cut = []
    original = kernels.sliced_keys_attention
    monkeypatch.setattr(kernels, "sliced_keys_attention", lambda *args: cut.append(args[-1]) or original(*args))
    model = off_init(build(make(attention, kernel="sdpa", kv_heads=kv_heads, block_size=2100)))
    idx = torch.randint(0, 37, (1, 2049))

    def last_step(threads: int) -> torch.Tensor:
        monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
        with torch.no_grad():
            caches = model.new_caches(1)
            model(idx[:, :-1], caches)
            return model(idx[:, -1:], caches)

    uncut = last_step(1)
    assert cut == []
    torch.testing.assert_close(last_step(2), uncut, rtol=1e-4, atol=1e-5)
    assert cut == ([slices] * model.cfg.layers if slices else [])  # each layer's step
    assert kernels.key_slices(torch.zeros(1, 1, 4096, 8)) == 1  # with gradients on, as in training
    with torch.no_grad():
        assert kernels.key_slices(torch.zeros(1, 1, 4096, 8)) == 2
        assert kernels.key_slices(torch.zeros(1, 1, 2047, 8)) == 1  # too few keys for two slices


def test_a_decode_step_cut_into_slices_runs_under_autocast(monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 autocast over a model and cache in fp32 hands the kernel bf16 queries and fp32 keys: torch's sdpa casts
    them itself, the private kernel the slices go to is no autocast op and refused the mix."""
    model = off_init(build(make("mqa", kernel="sdpa", kv_heads=1, block_size=2100)))
    idx = torch.randint(0, 37, (1, 2049))

    def last_step(threads: int) -> torch.Tensor:
        monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            caches = model.new_caches(1)
            model(idx[:, :-1], caches)
            return model(idx[:, -1:], caches).float()

    torch.testing.assert_close(last_step(2), last_step(1), rtol=2e-2, atol=2e-2)


REPEAT = "aten::repeat_interleave"  # what torch's own fallback runs too, when handed shared heads it cannot take


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("attention, pos", [("gqa", "rope"), ("mqa", "alibi"), ("mla", "rope")])
def test_shared_key_value_heads_are_never_repeated(attention: str, pos: str, kernel: str) -> None:
    """Training (with attention dropout, which torch's fused kernel otherwise hands to a fallback that repeats
    them), a prompt and decode steps run no op that repeats keys/values per query head, and grouped-query attention
    equals mha with its key/value heads repeated."""
    model = off_init(build(make(attention, pos, kernel=kernel, dropout=0.1)))
    idx = torch.randint(0, 37, (2, 16))
    with profile() as trace:
        model.train()
        F.cross_entropy(model(idx).flatten(0, 1), idx.flatten()).backward()
        model.eval()
        with torch.no_grad():
            prefill_then_decode(model, idx, 9)
    assert REPEAT not in {event.name for event in trace.events()}
    if attention != "mla":
        torch.testing.assert_close(model(idx), repeated_heads(model, 4)(idx), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attention", list(ATTENTION))
def test_a_variant_reads_model_kernel_exactly_when_it_forms_weights(attention: str) -> None:
    # The cost command and the viewer take has_weights for "computes through model.kernel": a variant whose
    # from_config left the kernel out ran the written-out maths under the default sdpa, silently, and the cost
    # command measured that twice under --kernel sdpa math.
    forms = ATTENTION[attention].has_weights
    reads = "kernel" in settings_read(ModelConfig(vocab_size=5, attention=attention))
    assert reads == forms, f"attention={attention} has has_weights={forms} but {'reads' if reads else 'ignores'} " \
                           "model.kernel: pass cfg.kernel on to Attention in its from_config, or set has_weights = " \
                           "False where it never forms softmax weights"


@pytest.mark.parametrize("attention", list(ATTENTION))
@pytest.mark.parametrize("positions", [3, 16])
def test_cache_bytes_from_the_tensors_are_the_variants_formula(attention: str, positions: int) -> None:
    """A cache made for `positions` tokens and filled holds what the variant's formula says (a window of 4 keeps at
    most 4 positions; linear attention's state is the same at any length), in fp32 and bf16."""
    model = build(make(attention, "learned" if attention == "torch_mha" else "rope"))
    for dtype in (torch.float32, torch.bfloat16):
        caches = model.to(dtype).new_caches(2, dtype=dtype, max_len=positions)
        with torch.no_grad():
            model(torch.randint(0, 37, (2, positions)), caches)
        assert tensor_bytes(caches) == model.cache_bytes(2, positions, dtype) > 0
    rope_dim = 4  # mla's shared rotary key: half a head of 8
    per_token = {"mha": 2 * 32, "gqa": 2 * 2 * 8, "mqa": 2 * 8, "mla": BASE["kv_latent_dim"] + rope_dim}
    if attention in per_token:  # the exact ratios: gqa kv_heads/heads of mha, mqa 1/heads, mla its latent
        assert model.cache_bytes(1, positions, torch.float32) == 2 * positions * per_token[attention] * 4
