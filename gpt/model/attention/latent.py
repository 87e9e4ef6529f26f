"""Multi-head latent attention (DeepSeek-V2, 2024): keys and values are rebuilt from one low-rank
latent per position, so the cache holds that latent (plus one small rotary key) instead of every
head's keys and values; a decode step absorbs the rebuilding into the query and the output instead."""
from __future__ import annotations

import warnings

import torch
from torch import nn

from gpt.model.attention.base import Attention, KVCache
from gpt.model.config import ModelConfig
from gpt.model.positional import Positional


LATENT_DIM = 32  # the latent's width where model.kv_latent_dim is unset


def latent_width(cfg: ModelConfig) -> int:
    """The latent width cfg sets, or LATENT_DIM where it sets none."""
    return LATENT_DIM if cfg.kv_latent_dim is None else cfg.kv_latent_dim


def rope_width(head_dim: int) -> int:
    """The decoupled rotary part of each query head and of the shared key: half a head, kept even for RoPE's
    feature pairs."""
    return max(2, head_dim // 4 * 2)


class MultiHeadLatentAttention(Attention):
    """Queries as usual; keys/values up-projected from a `latent_dim` latent. Position enters through
    a decoupled part: each query head carries `rope_dim` extra features and all heads share one
    extra key of that width, rotated once and cached, so the latent itself stays position-free.

    A prompt rebuilds every head's keys and values from the latents. A decode step does not: since
    q.(W_k c) = (W_k^T q).c, each query is mapped into the latent space and scored against the cached
    latents directly (one key/value head shared by all query heads, as in MQA), and the weighted sum of
    latents is mapped to each head's value afterwards. QK-norm normalises the rebuilt keys, which no
    mapping of the query can reproduce: with it, decoding rebuilds as prompts do."""

    own_settings = ("kv_latent_dim",)

    def __init__(self, dim: int, heads: int, latent_dim: int, dropout: float = 0.0, bias: bool = False,
                 qk_norm: bool = False, norm_eps: float = 1e-5, kernel: str = "math") -> None:
        super().__init__(heads, heads, dim // heads, dropout, qk_norm, norm_eps, kernel)
        self.rope_dim = rope_width(self.head_dim)
        self.latent_dim = latent_dim
        self.query = nn.Linear(dim, heads * (self.head_dim + self.rope_dim), bias=bias)
        self.down = nn.Linear(dim, latent_dim, bias=bias)
        self.key_rope = nn.Linear(dim, self.rope_dim, bias=bias)
        self.key_up = nn.Linear(latent_dim, dim, bias=bias)
        self.value_up = nn.Linear(latent_dim, dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)
        self.absorbs = not qk_norm

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> MultiHeadLatentAttention:
        return cls(cfg.dim, cfg.heads, latent_width(cfg), cfg.dropout, cfg.bias, cfg.qk_norm, cfg.norm_eps, cfg.kernel)

    @classmethod
    def rotated(cls, cfg: ModelConfig) -> tuple[int, str, str]:
        return rope_width(cfg.head_dim), "its rotary part of dim/heads", "change model.dim or model.heads"

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        latent = latent_width(cfg)
        if latent < 1:
            raise ValueError(f"kv_latent_dim={latent} must be a positive integer: set model.kv_latent_dim")
        # What the variant buys is a smaller cache than every head's keys and values; a latent that wide keeps as much
        # or more, with more weights than mha, and a sweep's row would show mla's costs with none of its saving.
        rope, full = rope_width(cfg.head_dim), 2 * cfg.dim
        if latent + rope >= full:
            raise ValueError(f"kv_latent_dim={latent} and the rotary key of {rope} cache "
                             f"{latent + rope} numbers a position, no fewer than the {full} of every head's "
                             f"keys and values (2 x dim={cfg.dim}): a latent that saves nothing; set "
                             f"model.kv_latent_dim below {full - rope}, or use attention=mha")

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> KVCache:
        # Each position's latent and rotary key side by side in the keys; a decode step reads them as its values
        # too, so nothing is stored for values.
        return KVCache(batch, 1, max_len, self.latent_dim + self.rope_dim, device, dtype, value_dim=0)

    def cache_bytes(self, batch: int, positions: int, element_size: int) -> int:
        """One latent and one shared rotary key per position."""
        return batch * positions * (self.latent_dim + self.rope_dim) * element_size

    def forward(self, x: torch.Tensor, pos: Positional, cache: KVCache | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        H, D, R, L = self.heads, self.head_dim, self.rope_dim, self.latent_dim
        start = cache.length if cache is not None else 0
        q = self.query(x).view(B, T, H, D + R).transpose(1, 2)  # (B, H, T, D + R)
        q_content, q_rope = q.split([D, R], dim=-1)  # (B, H, T, D), (B, H, T, R)
        k_rope = self.key_rope(x).unsqueeze(1)  # (B, 1, T, R): one rotary key for all heads
        q_rope, k_rope = pos.rotate(q_rope, k_rope, start)
        latents = torch.cat([self.down(x).unsqueeze(1), k_rope], dim=-1)  # (B, 1, T, L + R)
        if cache is not None:
            latents = cache.append(latents, latents[..., :0])[0]  # (B, 1, S, L + R)
        if cache is not None and T == 1 and not self.keep_weights and self.decodes_absorbed():
            y = self.attend_absorbed(self.q_norm(q_content), q_rope, latents, pos)  # (B, H, T, D)
        else:
            S = latents.shape[2]
            latent, k_rope = latents.squeeze(1).split([L, R], dim=-1)  # (B, S, L), (B, S, R)
            k_content = self.key_up(latent).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)
            v = self.value_up(latent).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)
            q = torch.cat([self.q_norm(q_content), q_rope], dim=-1)  # (B, H, T, D + R)
            k = torch.cat([self.k_norm(k_content), k_rope.unsqueeze(1).expand(B, H, S, R)], dim=-1)  # (B, H, S, D + R)
            y = self.attend(q, k, v, pos)  # (B, H, T, D)
        return self.resid_dropout(self.proj(y.transpose(1, 2).reshape(B, T, H * D)))  # (B, T, C)

    def decodes_absorbed(self) -> bool:
        if not self.absorbs:
            warnings.warn("attention=mla with model.qk_norm=true rebuilds every cached key at each decode step "
                          "(QK-norm cannot be absorbed into the query); set model.qk_norm=false to decode from "
                          "the latents", stacklevel=3)
        return self.absorbs

    def attend_absorbed(self, q_content: torch.Tensor, q_rope: torch.Tensor, latents: torch.Tensor,
                        pos: Positional) -> torch.Tensor:
        """Queries (B, H, T, D) and (B, H, T, R) against the cached latents and rotary keys (B, 1, S, L + R),
        without rebuilding keys or values: `attend`'s output (B, H, T, D) in the rebuilt form."""
        H, D, L = self.heads, self.head_dim, self.latent_dim
        key_up = self.key_up.weight.view(H, D, L)  # (H * D, L) -> (H, D, L): head h's keys are key_up[h] @ latent
        # A key bias adds q.b to every score of a query alike, which the softmax ignores.
        q_latent = torch.einsum("bhtd,hdl->bhtl", q_content, key_up)  # (B, H, T, L)
        q = torch.cat([q_latent, q_rope], dim=-1)  # (B, H, T, L + R)
        # The latents serve as values too (their rotary part is dropped after), keeping keys and values one width.
        mixed = self.attend(q, latents, latents, pos, scale=(D + self.rope_dim) ** -0.5)[..., :L]  # (B, H, T, L)
        value_up = self.value_up.weight.view(H, D, L)  # (H * D, L) -> (H, D, L)
        y = torch.einsum("bhtl,hdl->bhtd", mixed, value_up)  # (B, H, T, D)
        if self.value_up.bias is not None:  # the weights sum to 1, so the value bias passes through once
            y = y + self.value_up.bias.view(H, 1, D)  # (H * D,) -> (H, 1, D)
        return y
