"""What every attention variant shares: the causal mask, the preallocated KV cache and `Attention`, the
project -> rotate -> cache -> attend -> project-back pipeline whose `attend` hands blocks of queries, each with
the keys it may see, to the kernel that model.kernel names (attention/kernels.py).

Every variant maps (B, T, C) -> (B, T, C), takes the model's positional encoding (which may rotate
queries/keys or bias scores) and an optional cache from `new_cache`; its output projection into the
residual stream is named `proj` so the model can scale its init by depth."""
from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from gpt.model.attention.kernels import KERNELS, math_attention, math_weights
from gpt.model.config import ModelConfig
from gpt.model.norm import RMSNorm
from gpt.model.positional import Positional


def causal_mask(q_len: int, k_len: int, start: int, device: torch.device) -> torch.Tensor:
    """(q_len, k_len) bool, True where query start+i may see key j (j <= start+i)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=start)


def check_capacity(positions: int, capacity: int, batch: int) -> None:
    """Refuse to cache more positions than a cache may hold: past them it would overwrite, or index past its end."""
    if positions > capacity:
        raise ValueError(f"these caches hold {capacity} positions and this call would make them {positions}: make "
                         f"them with new_caches({batch}, max_len={positions}) or more (leave max_len out for "
                         "block_size, the most a model reads)")


class Cache(Protocol):
    """What the model and the decode loop ask of any variant's cache (KVCache, a window's ring, linear attention's
    state, per-head caches): how many sequences it holds, how many positions it has seen, its form, and to forget
    them."""

    @property
    def batch(self) -> int: ...

    @property
    def length(self) -> int: ...

    @property
    def form(self) -> str:
        """Its kind and the sizes a layer reads it by, batch and positions left out: a model takes caches of the
        form its own new_caches makes, whatever made them."""
        ...

    def reset(self) -> None: ...


class KVCache:
    """Preallocated key/value buffers of one layer; `append` writes in place, so decoding one token
    costs no reallocation. Values may be narrower than keys, or absent (value_dim=0) where the keys
    serve as values too (MLA's latent, torch_mha's inputs)."""

    def __init__(self, batch: int, heads: int, max_len: int, head_dim: int,
                 device: torch.device, dtype: torch.dtype, value_dim: int | None = None) -> None:
        # Left unwritten: only the first `length` positions are ever read.
        self.k = torch.empty(batch, heads, max_len, head_dim, device=device, dtype=dtype)
        self.v = torch.empty(batch, heads, max_len, head_dim if value_dim is None else value_dim, device=device,
                             dtype=dtype)
        self.batch = batch
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store keys/values (B, H, T, D) after those cached; return all of them (B, H, length, D)."""
        end = self.length + k.shape[2]
        check_capacity(end, self.k.shape[2], self.k.shape[0])
        self.k[:, :, self.length:end] = k
        self.v[:, :, self.length:end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    @property
    def form(self) -> str:
        return f"KVCache(heads={self.k.shape[1]}, keys={self.k.shape[3]}, values={self.v.shape[3]})"

    def reset(self) -> None:
        self.length = 0


# Most attention scores one block of queries may form at once (16 MiB in fp32): a long prompt through the written-
# out maths is cut into blocks of queries, so it never holds the (T, S) score matrix of every query.
SCORE_BUDGET = 2 ** 22


class Attention(nn.Module):
    """What the softmax variants share: project, rotate, cache, attend, project back. A variant supplies
    `project` (and a `proj`), and may narrow which keys a query sees (`mask`, `key_range`); `attend`
    computes softmax attention through the chosen kernel."""

    # False for variants that never form the (T, S) weight matrix, whatever model.kernel (the softmax variants form
    # it through the written-out kernel); with keep_weights every variant computes it (or, for linear attention,
    # its implied weights) the explicit way.
    has_weights = True
    # The ModelConfig fields left unset (None) by default that this variant alone reads: one set under another
    # variant would change nothing, so check_parts refuses it.
    own_settings: tuple[str, ...] = ()

    def __init__(self, heads: int, kv_heads: int, head_dim: int, dropout: float = 0.0,
                 qk_norm: bool = False, norm_eps: float = 1e-5, kernel: str = "math") -> None:
        super().__init__()
        self.keep_weights = False  # when True, forward stores its attention weights (B, H, T, S) in .weights
        self.weights: torch.Tensor | None = None
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.kernel = kernel
        # QK-norm (Henry et al. 2020; Dehghani et al. 2023) bounds the logits, which steadies training.
        self.q_norm = RMSNorm(head_dim, norm_eps) if qk_norm else nn.Identity()
        self.k_norm = RMSNorm(head_dim, norm_eps) if qk_norm else nn.Identity()
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> Attention:
        """The layer cfg describes: its sizes and own settings, and the shared dropout, bias, qk_norm, norm_eps and
        kernel passed on to Attention (train.py refuses a setting no part reads as one that changes nothing)."""
        raise NotImplementedError(f"attention={cfg.attention} ({cls.__name__}) defines no from_config(cfg): add the "
                                  "classmethod that builds it from a ModelConfig, as MultiHeadAttention.from_config "
                                  "does")

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        """Raise ValueError naming the fix when cfg's parameters or positional encoding do not suit this variant."""

    @classmethod
    def rotated(cls, cfg: ModelConfig) -> tuple[int, str, str]:
        """The width of the queries and keys a rotating encoding turns (by feature pairs, so it must be even), the
        settings it comes from, and how to change it: each head's, here."""
        return cfg.head_dim, "dim/heads", "change model.dim or model.heads"

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> KVCache:
        return KVCache(batch, self.kv_heads, max_len, self.head_dim, device, dtype)

    def cache_bytes(self, batch: int, positions: int, element_size: int) -> int:
        """Bytes this layer's cache holds for `positions` tokens (what new_cache(batch, positions) allocates):
        a key and a value of head_dim per key/value head and position."""
        return batch * self.kv_heads * positions * 2 * self.head_dim * element_size

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T, C) -> queries (B, H, T, D), keys and values (B, H_kv, T, D)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, pos: Positional, cache: KVCache | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        start = cache.length if cache is not None else 0
        q, k, v = self.project(x)
        q, k = pos.rotate(self.q_norm(q), self.k_norm(k), start)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H_kv, S, D): every key up to and including this chunk's
        y = self.attend(q, k, v, pos)  # (B, H, T, D)
        y = y.transpose(1, 2).reshape(B, T, -1)  # (B, T, H * D)
        return self.resid_dropout(self.proj(y))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: Positional,
               scale: float | None = None) -> torch.Tensor:
        """softmax(q k^T * scale + bias, masked) v for queries (B, H, T, D) and keys/values (B, H_kv, S, D), the
        keys ending where the queries end; scale defaults to 1/sqrt(D). Blocks of queries go to the kernel
        with only the keys they may see, so a long prompt never forms every query's scores at once."""
        T, S = q.shape[2], k.shape[2]
        scale = q.shape[-1] ** -0.5 if scale is None else scale
        dropout = self.attn_dropout.p if self.training else 0.0
        offset = S - T  # query i sits at key position offset + i
        if self.keep_weights:  # every query's weights over every key, formed the written-out way to be kept
            allowed, bias = self.mask(T, S, offset, q.device), self.score_bias(pos, T, S, offset, q.device)
            weights = math_weights(q, k, scale, allowed, bias)  # (B, H_kv, G, T, S)
            self.weights = weights.detach().reshape(q.shape[0], self.heads, T, S)  # (B, H, T, S)
            return math_attention(q, k, v, scale, allowed, bias, dropout, weights=weights)
        # Compiled, the maths of one query fuses with the layers around it into a few loops: a decode step of the
        # 4x4x128 model ran 1.2-1.3x faster so than through torch's fused kernel.
        kernel = math_attention if T == 1 and torch.compiler.is_compiling() else KERNELS[self.kernel]
        # The maths forms every score of a block, so blocks are sized to a budget; the fused kernel forms none,
        # and applies a square causal mask itself, so only an explicit mask or a score bias needs cutting. A
        # compiled graph takes one block: cut by a dynamic length, it would be a new graph per length.
        whole = T == 1 or torch.compiler.is_compiling() or (kernel is not math_attention and offset == 0
                                                            and not pos.biases_scores and self.plain_causal(T))
        block = T if whole else self.query_block(q.shape[0] * q.shape[1], T, S)
        outputs = []
        # Last block first: later queries see more keys, so each block's scores then fit in memory the one before
        # freed. In the growing order the heap fragments: a 16k-token prompt peaked at 3.9 GB instead of 0.8.
        for first in reversed(range(0, T, block)):
            n = min(block, T - first)  # queries first .. first + n - 1
            lo, hi = self.key_range(offset + first, offset + first + n - 1)
            at = offset + first - lo  # where the block's first query sits among its keys
            causal = at == 0 and hi - lo == n and self.plain_causal(n)
            # One query's key range is exactly what it sees; a block's queries see different parts of theirs, which
            # the fused kernel works out itself for a causal square (a (T, T) mask of a long prompt is costly).
            skip_mask = n == 1 or (causal and kernel is not math_attention)
            allowed = None if skip_mask else self.mask(n, hi - lo, at, q.device)  # (n, hi - lo)
            bias = self.score_bias(pos, n, hi - lo, at, q.device)  # (H, n, hi - lo) or None
            outputs.append(kernel(q[:, :, first:first + n], k[:, :, lo:hi], v[:, :, lo:hi], scale, allowed, bias,
                                  dropout, causal))
        return outputs[0] if len(outputs) == 1 else torch.cat(outputs[::-1], dim=2)  # (B, H, T, Dv)

    def query_block(self, batch_heads: int, q_len: int, k_len: int) -> int:
        """Queries per block: as many as keep one block's scores within SCORE_BUDGET."""
        return max(1, SCORE_BUDGET // (batch_heads * k_len))

    def key_range(self, first: int, last: int) -> tuple[int, int]:
        """The keys [lo, hi) that queries at key positions first..last may see between them."""
        return 0, last + 1

    def plain_causal(self, n: int) -> bool:
        """Whether n queries against their own n keys see exactly the causal triangle (a window may cut it)."""
        return True

    def score_bias(self, pos: Positional, q_len: int, k_len: int, offset: int,
                   device: torch.device) -> torch.Tensor | None:
        return pos.score_bias(q_len, k_len, offset, self.heads, device)

    def mask(self, q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
        # Looked up at call time so a test can swap in a leaky mask and see causality tests fail.
        return causal_mask(q_len, k_len, offset, device)
