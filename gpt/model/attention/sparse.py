"""Attention that stores less: grouped-query attention (Ainslie et al. 2023) and multi-query
attention (Shazeer 2019) share key/value heads between query heads; sliding-window attention
(Beltagy et al. 2020; Mistral 2023) sees only the last `window` positions, caches only those in a ring
and prefills chunks of queries against their band of keys, O(T x window), many chunks to one kernel call."""
from __future__ import annotations

import torch
from torch.nn import functional as F

from gpt.model.attention import base
from gpt.model.attention.kernels import KERNELS, math_attention
from gpt.model.attention.mha import MultiHeadAttention
from gpt.model.config import ModelConfig
from gpt.model.positional import Positional


class GroupedQueryAttention(MultiHeadAttention):
    """`kv_heads` key/value heads, each shared by heads // kv_heads query heads: a cache that many
    times smaller. kv_heads == heads (or None) is `mha`; kv_heads == 1 is `mqa`."""

    own_settings = ("kv_heads",)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> GroupedQueryAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, kv_heads=cfg.kv_heads,
                   norm_eps=cfg.norm_eps, kernel=cfg.kernel)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if cfg.kv_heads is not None and cfg.heads % cfg.kv_heads:
            raise ValueError(f"kv_heads={cfg.kv_heads} must divide heads={cfg.heads}: pick model.kv_heads from "
                             f"{[h for h in range(1, cfg.heads + 1) if cfg.heads % h == 0]}")


class MultiQueryAttention(MultiHeadAttention):
    """One key/value head shared by every query head."""

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> MultiQueryAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, kv_heads=1, norm_eps=cfg.norm_eps,
                   kernel=cfg.kernel)


WINDOW = 8  # positions each query sees where model.window is unset


def window_of(cfg: ModelConfig) -> int:
    """The window cfg sets, or WINDOW where it sets none."""
    return WINDOW if cfg.window is None else cfg.window


# The shortest chunk of queries a long prompt is cut into (at least the window): chunks of a few queries would make
# many small batches of the kernel for little saved arithmetic.
MIN_CHUNK = 128


class WindowCache:
    """A ring of `slots` key/value slots (the window, or max_len for a shorter context): position p lives in
    slot p % slots, so a decoded token overwrites, in place, the one position that left the window.
    `length` counts every position seen, which is where the next one sits."""

    def __init__(self, batch: int, heads: int, window: int, max_len: int, head_dim: int,
                 device: torch.device, dtype: torch.dtype) -> None:
        slots = min(window, max_len)
        self.k = torch.empty(batch, heads, slots, head_dim, device=device, dtype=dtype)  # read only once written
        self.v = torch.empty_like(self.k)
        self.batch = batch
        self.length = 0
        # Kept for its form: a ring of another window's slots, once it wraps, holds other positions than it sees.
        self.window = window
        # Positions it may take in all, when its ring is shorter than the window: past them the ring would overwrite
        # positions the window still sees, and attention would silently see fewer (KVCache raises there too).
        self.capacity = max_len if max_len < window else None

    @property
    def form(self) -> str:
        return f"WindowCache(heads={self.k.shape[1]}, keys={self.k.shape[3]}, window={self.window})"

    def kept(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The kept keys/values in slot order (B, H, min(length, slots), D)."""
        held = min(self.length, self.k.shape[2])
        return self.k[:, :, :held], self.v[:, :, :held]

    def in_order(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The kept keys/values oldest first (B, H, min(length, slots), D): a copy once the ring has wrapped."""
        slots = self.k.shape[2]
        if self.length <= slots:
            return self.kept()
        oldest = self.length % slots
        return (torch.cat([self.k[:, :, oldest:], self.k[:, :, :oldest]], dim=2),  # (B, H, slots, D)
                torch.cat([self.v[:, :, oldest:], self.v[:, :, :oldest]], dim=2))

    def store(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write the keys/values (B, H, T, D) of the next T positions into their slots (the last `slots` of them)."""
        slots, T = self.k.shape[2], k.shape[2]
        if self.capacity is not None:
            base.check_capacity(self.length + T, self.capacity, self.k.shape[0])
        if T == 1:
            slot = self.length % slots
            self.k[:, :, slot:slot + 1], self.v[:, :, slot:slot + 1] = k, v
        else:
            kept = min(T, slots)
            where = torch.arange(self.length + T - kept, self.length + T, device=k.device) % slots
            # In the ring's dtype, as the slot assignment above casts: under autocast keys arrive in bf16.
            self.k.index_copy_(2, where, k[:, :, T - kept:].to(self.k.dtype))
            self.v.index_copy_(2, where, v[:, :, T - kept:].to(self.v.dtype))
        self.length += T

    def reset(self) -> None:
        self.length = 0


class SlidingWindowAttention(MultiHeadAttention):
    """Each position attends to itself and the window - 1 positions before it."""

    own_settings = ("window",)

    def __init__(self, dim: int, heads: int, window: int, dropout: float = 0.0, bias: bool = False,
                 qk_norm: bool = False, norm_eps: float = 1e-5, kernel: str = "math") -> None:
        super().__init__(dim, heads, dropout, bias, qk_norm, norm_eps=norm_eps, kernel=kernel)
        self.window = window

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> SlidingWindowAttention:
        return cls(cfg.dim, cfg.heads, window_of(cfg), cfg.dropout, cfg.bias, cfg.qk_norm, cfg.norm_eps, cfg.kernel)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if window_of(cfg) < 1:
            raise ValueError(f"window={cfg.window} must be at least 1 (a position always sees itself): "
                             "set model.window")

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> WindowCache:
        return WindowCache(batch, self.kv_heads, self.window, max_len, self.head_dim, device, dtype)

    def cache_bytes(self, batch: int, positions: int, element_size: int) -> int:
        """A key and a value per key/value head for each of at most `window` positions."""
        return batch * self.kv_heads * min(positions, self.window) * 2 * self.head_dim * element_size

    def forward(self, x: torch.Tensor, pos: Positional, cache: WindowCache | None = None) -> torch.Tensor:
        if cache is None:
            return super().forward(x, pos)
        B, T, _ = x.shape
        q, k, v = self.project(x)
        q, k = pos.rotate(self.q_norm(q), self.k_norm(k), cache.length)
        if T == 1:  # a decode step: the ring, with the new position written into it, is what it sees
            cache.store(k, v)
            # Keys are rotated before they are cached, so slot order matters only to a bias by distance (ALiBi).
            k, v = cache.in_order() if pos.biases_scores else cache.kept()  # (B, H, <= window, D)
        else:  # a prompt: the kept positions, oldest first, then the new ones
            new_k, new_v = k, v
            if cache.length:  # a first prompt has nothing kept: joining would only copy its keys and values
                past_k, past_v = cache.in_order()
                # Joined before storing: until the ring wraps, in_order's keys are views of its slots, which the
                # store would overwrite with this prompt's own positions.
                k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)  # (B, H, kept + T, D)
            cache.store(new_k, new_v)
        y = self.attend(q, k, v, pos).transpose(1, 2).reshape(B, T, -1)  # (B, H, T, D) -> (B, T, H * D)
        return self.resid_dropout(self.proj(y))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: Positional,
               scale: float | None = None) -> torch.Tensor:
        """On a GPU, a long prompt in chunks of c >= window queries: each sees only its own chunk's keys and the
        chunk's before, so every chunk after the first goes to the kernel in one batch against its 2c keys and one
        shared band mask. Block by block (the shared path), a 64k prompt was hundreds of small kernel calls a layer,
        and a GPU waited on their launches: 0.26x `mha`'s prefill on an H200. A CPU computes the blocks about as
        fast as it launches them, and there the blocks' tighter bands (fewer masked scores) won: 10,400 against
        9,200 tokens/s at 16k. The first chunk, whose keys may start in a cache, takes the shared path."""
        T, S = q.shape[2], k.shape[2]
        c = max(self.window, MIN_CHUNK)
        if not self.chunks_at_once(q, c) or self.keep_weights or torch.compiler.is_compiling():
            return super().attend(q, k, v, pos, scale)
        scale = q.shape[-1] ** -0.5 if scale is None else scale
        dropout = self.attn_dropout.p if self.training else 0.0
        offset = S - T  # query i sits at key position offset + i
        first = super().attend(q[:, :, :c], k[:, :, :offset + c], v[:, :, :offset + c], pos, scale)  # (B, H, c, D)
        n = -(-(T - c) // c)  # the chunks after the first, the last one padded
        rest = F.pad(q[:, :, c:], (0, 0, 0, n * c - (T - c)))  # (B, H, n * c, D)
        B, H, _, D = rest.shape
        rest = rest.reshape(B, H, n, c, D).transpose(1, 2).reshape(B * n, H, c, D)  # (B * n, H, c, D)
        bands = [self.bands(x[:, :, offset:], n, c) for x in (k, v)]  # each (B * n, H_kv, 2c, D)
        # Padded queries see padded keys only (no query sees a later key): their outputs are dropped.
        allowed = self.mask(c, 2 * c, c, q.device)  # (c, 2c): chunk j's queries against chunks j - 1 and j
        bias = self.score_bias(pos, c, 2 * c, c, q.device)  # (H, c, 2c) or None: distances repeat chunk to chunk
        kernel = KERNELS[self.kernel]
        # The written-out maths forms every score, so it takes as many chunks at once as the score budget allows.
        group = n if kernel is not math_attention else max(1, base.SCORE_BUDGET // (B * H * c * 2 * c))
        ys = [kernel(rest[i:i + group * B], *(band[i:i + group * B] for band in bands), scale, allowed, bias,
                     dropout) for i in range(0, n * B, group * B)]
        y = torch.cat(ys).reshape(B, n, H, c, -1).transpose(1, 2).reshape(B, H, n * c, -1)  # (B, H, n * c, Dv)
        return torch.cat([first, y[:, :, :T - c]], dim=2)  # (B, H, T, Dv)

    def chunks_at_once(self, q: torch.Tensor, c: int) -> bool:
        """Whether queries (B, H, T, D) are a prompt long enough, on a device that launches kernels slowly enough,
        for chunks batched into one kernel call."""
        return q.is_cuda and q.shape[2] > 2 * c

    @staticmethod
    def bands(x: torch.Tensor, n: int, c: int) -> torch.Tensor:
        """Keys or values (B, H_kv, T, D) from the prompt's first position -> (B * n, H_kv, 2c, D): positions
        (j - 1)c .. (j + 1)c - 1 for chunk j = 1..n, zero past the end."""
        B, H_kv, T, D = x.shape
        x = F.pad(x, (0, 0, 0, (n + 1) * c - T))  # (B, H_kv, (n + 1) c, D)
        windows = x.unfold(2, 2 * c, c)  # (B, H_kv, n, D, 2c): overlapping views, each copied once below
        return windows.permute(0, 2, 1, 4, 3).reshape(B * n, H_kv, 2 * c, D)  # (B * n, H_kv, 2c, D)

    def query_block(self, batch_heads: int, q_len: int, k_len: int) -> int:
        # A block's keys are its queries plus the window - 1 before them: blocks about a window long keep the
        # band dense without paying for much more than it.
        return min(max(self.window, 128), super().query_block(batch_heads, q_len, min(k_len, 2 * self.window)))

    def key_range(self, first: int, last: int) -> tuple[int, int]:
        return max(0, first - self.window + 1), last + 1

    def plain_causal(self, n: int) -> bool:
        return n <= self.window

    def mask(self, q_len: int, k_len: int, offset: int, device: torch.device) -> torch.Tensor:
        # Causal, minus every key window or more positions back.
        return super().mask(q_len, k_len, offset, device) & ~super().mask(q_len, k_len, offset - self.window, device)
