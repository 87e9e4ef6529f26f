"""How softmax attention is computed, the axis `model.kernel` picks (like Hugging Face's attn_implementation):
the maths written out (the teaching reference, and the weights the viewer shows) or torch's fused
scaled_dot_product_attention (FlashAttention, Dao et al. 2022), which never forms the weight matrix.

Both take one block of queries against the keys it may see. Grouped key/value heads (GQA, MQA, absorbed MLA)
are never repeated per query head: each key/value head's query heads are folded into its rows instead. On a CPU a
decode step with at most half as many (sequence, key/value head) pairs as threads cuts its keys into slices
(flash-decoding)."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional as F


def fold_groups(q: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """Queries (B, H, T, D) -> (B, H_kv, G * T, D): the G = H / H_kv query heads sharing a key/value head
    side by side, so one multiply per key/value head serves them all."""
    B, H, T, D = q.shape
    return q.reshape(B, kv_heads, H // kv_heads * T, D)  # (B, H_kv, G * T, D)


def unfold_groups(y: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, H_kv, G * T, D) -> (B, H, T, D), undoing fold_groups."""
    B, _, rows, D = y.shape
    return y.reshape(B, heads, rows * y.shape[1] // heads, D)  # (B, H, T, D)


def scores_bias(allowed: torch.Tensor | None, bias: torch.Tensor | None, heads: int,
                dtype: torch.dtype) -> torch.Tensor | None:
    """One additive (H, T, S) term: the score bias, -inf where a key may not be seen; None when neither applies."""
    if bias is None:
        return None
    bias = bias.to(dtype).expand(heads, *bias.shape[-2:])  # (H, T, S)
    return bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))


def math_weights(q: torch.Tensor, k: torch.Tensor, scale: float, allowed: torch.Tensor | None,
                 bias: torch.Tensor | None) -> torch.Tensor:
    """softmax(q k^T * scale + bias) over the allowed keys, for queries (B, H, T, D) and keys (B, H_kv, S, D):
    (B, H_kv, G, T, S), the G query heads of each key/value head side by side."""
    B, H, T, D = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    G = H // H_kv
    rows = fold_groups(q, H_kv).reshape(B * H_kv, G * T, D)  # (B * H_kv, G * T, D)
    keys = k.reshape(B * H_kv, S, D).transpose(1, 2)  # (B * H_kv, D, S)
    added = additive_term(allowed, bias, G, H_kv, q.dtype)  # (H_kv or 1, G * T, S) or None
    if added is None:
        scores = torch.bmm(rows, keys) * scale
    else:
        # The scale, the bias and the mask ride on the multiply itself: a separate scaling and masked_fill were two
        # more passes over every score, forward and backward. The term is a view where every head shares it (a mask
        # alone); a score bias, per head, is copied per sequence as adding it was.
        added = added.expand(B, H_kv, G * T, S).reshape(B * H_kv, G * T, S)
        scores = torch.baddbmm(added, rows, keys, alpha=scale)
    # In fp32 and back, as Hugging Face's eager attention does: torch's CPU softmax of bf16 scores took 3x as long as
    # converting them first (1.35 against 0.46 ms for (64, 4, 41, 41), one AMD EPYC thread).
    return F.softmax(scores.view(B, H_kv, G, T, S).float(), dim=-1).to(scores.dtype)


def additive_term(allowed: torch.Tensor | None, bias: torch.Tensor | None, groups: int, kv_heads: int,
                  dtype: torch.dtype) -> torch.Tensor | None:
    """What is added to the scaled scores: the score bias (H, T, S) and -inf where `allowed` (T, S) forbids a key,
    as (H_kv, G * T, S) for queries folded by fold_groups, (1, G * T, S) when every head shares it (a mask alone);
    None when neither applies."""
    if bias is None and allowed is None:
        return None
    if bias is None:  # the mask alone: one (T, S) term shared by every head
        T, S = allowed.shape
        term = torch.zeros(T, S, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))
        return term.repeat(groups, 1).unsqueeze(0)  # (T, S) -> (1, G * T, S)
    term = scores_bias(allowed, bias, kv_heads * groups, dtype)  # (H, T, S)
    return term.reshape(kv_heads, -1, term.shape[-1])  # (H_kv, G * T, S)


def math_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, allowed: torch.Tensor | None,
                   bias: torch.Tensor | None, dropout: float, causal: bool = False,
                   weights: torch.Tensor | None = None) -> torch.Tensor:
    """The maths written out: softmax(q k^T * scale + bias, masked) v; queries (B, H, T, D), keys and values
    (B, H_kv, S, D); `allowed` (T, S) says which keys each query sees (None: all). `weights` are this
    call's, when the caller formed them already (to keep them)."""
    weights = math_weights(q, k, scale, allowed, bias) if weights is None else weights  # (B, H_kv, G, T, S)
    if dropout:
        weights = F.dropout(weights, dropout)
    B, H_kv, G, T, S = weights.shape
    return unfold_groups(weights.view(B, H_kv, G * T, S) @ v, H_kv * G)  # (B, H_kv, G * T, Dv) -> (B, H, T, Dv)


def _computes_in_fp32(q: torch.Tensor) -> bool:
    """Training in bf16 on a CPU: torch's CPU flash kernel differentiates bf16 ~13x slower than fp32 (queries
    (256, 4, 16, 32) on one Xeon thread with AVX512-BF16: 74 ms against 5.5 ms forward and backward)."""
    return q.device.type == "cpu" and q.dtype == torch.bfloat16 and torch.is_grad_enabled()


# torch's CPU flash kernel with each query's log-sum-exp beside its output, which merging slices of keys needs
FLASH_WITH_LSE = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
# Fewest keys a slice: cut at 512 keys a slice, one 1k-key call of mqa's shape took 42 us against 34 uncut (AMD EPYC);
# at 1,024 and more a decode step of mqa gained 1.07x (2k keys) to 1.2-1.3x (4k, 16k): bench/decode_slices.py.
MIN_SLICE_KEYS = 1024


def key_slices(k: torch.Tensor) -> int:
    """Slices to cut keys (B, H_kv, S, D) into so every thread has work: torch's CPU flash kernel gives each
    (sequence, key/value head) pair one thread, so a decode step of mqa at batch 1 ran on one thread of two. 1 where
    the pairs already fill the threads, the keys are too few, a GPU computes (its kernels split keys themselves) or
    gradients are wanted (the private kernel is used for inference only)."""
    if k.device.type != "cpu" or torch.is_grad_enabled() or FLASH_WITH_LSE is None:
        return 1
    return max(1, min(torch.get_num_threads() // (k.shape[0] * k.shape[1]), k.shape[2] // MIN_SLICE_KEYS))


def sliced_keys_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                          slices: int) -> torch.Tensor:
    """Flash-decoding (Dao et al., 2023) on a CPU: queries (B, H_kv, R, D) attend to each of `slices` equal slices of
    the keys and values (B, H_kv, S, D) as separate items of one fused call (the keys left over, fewer than `slices`,
    in one more), and the slices' outputs are summed weighted by their share of the softmax's normaliser, from each
    slice's log-sum-exp: (B, H_kv, R, Dv), what attending to all the keys at once gives."""
    B, H_kv, R, D = q.shape
    size = k.shape[2] // slices
    even = size * slices

    def cut(x: torch.Tensor) -> torch.Tensor:  # (B, H_kv, S, W) -> (B * slices, H_kv, size, W)
        return x[:, :, :even].unflatten(2, (slices, size)).transpose(1, 2).flatten(0, 1)

    queries = q.unsqueeze(1).expand(B, slices, H_kv, R, D).flatten(0, 1)  # (B * slices, H_kv, R, D)
    out, lse = FLASH_WITH_LSE(queries, cut(k), cut(v), scale=scale)  # (B * slices, H_kv, R, Dv), (.., R)
    outs, lses = [out.unflatten(0, (B, slices))], [lse.unflatten(0, (B, slices))]  # (B, slices, H_kv, R, ...)
    if even < k.shape[2]:
        rest, rest_lse = FLASH_WITH_LSE(q, k[:, :, even:], v[:, :, even:], scale=scale)
        outs.append(rest.unsqueeze(1))  # (B, H_kv, R, Dv) -> (B, 1, H_kv, R, Dv)
        lses.append(rest_lse.unsqueeze(1))  # (B, H_kv, R) -> (B, 1, H_kv, R)
    share = torch.softmax(torch.cat(lses, dim=1), dim=1).unsqueeze(-1)  # (B, slices + 1 or slices, H_kv, R, 1)
    return (share * torch.cat(outs, dim=1).float()).sum(dim=1).to(q.dtype)  # (B, H_kv, R, Dv)


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, allowed: torch.Tensor | None,
                   bias: torch.Tensor | None, dropout: float, causal: bool = False) -> torch.Tensor:
    """`math_attention` in torch's fused kernel. `causal`: the block is a causal square, whose mask the kernel
    applies itself (skipping the keys above the diagonal instead of reading a mask); `allowed` may then be None."""
    if _computes_in_fp32(q):
        with torch.autocast("cpu", enabled=False):
            return sdpa_attention(q.float(), k.float(), v.float(), scale, allowed, bias, dropout, causal).to(q.dtype)
    if v.shape[-1] != q.shape[-1]:  # torch's CPU flash kernel takes one head width: pad values to it (MLA's rebuilt
        width = v.shape[-1]         # values are narrower than its keys), the padding's output is zero and dropped
        padded = F.pad(v, (0, q.shape[-1] - width))
        return sdpa_attention(q, k, padded, scale, allowed, bias, dropout, causal)[..., :width]
    heads, kv_heads = q.shape[1], k.shape[1]
    if causal and bias is None and not (dropout and kv_heads != heads):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, scale=scale,
                                              enable_gqa=kv_heads != heads)
    # An explicit mask, a score bias or dropout with shared key/value heads send torch's CPU kernel to its
    # written-out fallback, which repeats them per query head; folded query heads keep every call a plain one.
    groups = heads // kv_heads
    if causal and allowed is None:  # the square causal mask, left out by the caller for the branch above
        allowed = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
    mask = scores_bias(allowed, bias, heads, q.dtype)  # (H, T, S) or None
    if mask is None:
        mask = allowed if allowed is None or groups == 1 else allowed.repeat(groups, 1)  # (G * T, S) or None
    else:
        mask = mask.reshape(1, kv_heads, -1, mask.shape[-1])  # (1, H_kv, G * T, S): 4-D, which the flash kernel takes
    rows = fold_groups(q, kv_heads)  # (B, H_kv, G * T, D)
    slices = key_slices(k) if mask is None and not dropout else 1
    if slices > 1:
        if torch.is_autocast_enabled(q.device.type):  # the private kernel is no autocast op: cast as sdpa's would be
            dtype = torch.get_autocast_dtype(q.device.type)
            rows, k, v = rows.to(dtype), k.to(dtype), v.to(dtype)
        return unfold_groups(sliced_keys_attention(rows, k, v, scale, slices), heads)
    y = F.scaled_dot_product_attention(rows, k, v, attn_mask=mask, dropout_p=dropout, scale=scale)
    return unfold_groups(y, heads)  # (B, H_kv, G * T, Dv) -> (B, H, T, Dv)


Kernel = Callable[..., torch.Tensor]
KERNELS: dict[str, Kernel] = {"math": math_attention, "sdpa": sdpa_attention}
