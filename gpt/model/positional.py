"""Positional encodings. Each one acts where it belongs: added to the token embeddings (learned;
sinusoidal, Vaswani et al. 2017), rotating queries and keys (RoPE, Su et al. 2021), or biasing
attention scores (ALiBi, Press et al. 2022); `start` is the absolute position of the first token,
which is how they stay correct with a KV cache. Learned, sinusoidal and RoPE positions can also be
drawn at random in training (Ruoss et al. 2023): AtPositions reads an encoding at given positions."""
from __future__ import annotations

import torch
from torch import nn

from gpt.model.config import EMBEDDING_STD, INIT_STD, ModelConfig


Start = int | torch.Tensor  # the first token's position, or every token's position (B, T) when drawn


def span(start: Start, length: int, device: torch.device) -> torch.Tensor:
    """(T,) positions start..start+T-1, or the drawn (B, T) positions themselves."""
    return start if isinstance(start, torch.Tensor) else torch.arange(start, start + length, device=device)


def random_positions(batch: int, length: int, limit: int, device: torch.device) -> torch.Tensor:
    """(B, T) positions, each row a sorted random subset of 0..limit-1 (Ruoss et al. 2023): trained so, an
    encoding has seen positions up to `limit` while sequences stay short."""
    return torch.rand(batch, limit, device=device).argsort(dim=1)[:, :length].sort(dim=1).values


class Positional(nn.Module):
    """No positional information: the base every encoding overrides where it acts."""

    rotates = False  # acts in `rotate`: the attention must project queries/keys itself to apply it
    biases_scores = False  # acts in `score_bias`: the attention must form scores to add it
    drawable = False  # reads any positions given to it, so training may draw them (model.random_positions)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> Positional:
        return cls()

    @classmethod
    def validate(cls, cfg: ModelConfig, rotated: tuple[int, str, str]) -> None:
        """Raise ValueError naming the fix when cfg cannot use this encoding; `rotated` is what the attention
        variant would have it rotate: the width, the settings it comes from, how to change it."""
        if cfg.random_positions is not None and not cls.drawable:
            drawable = " or ".join(name for name, encoding in POSITIONAL.items() if encoding.drawable)
            raise ValueError(f"model.random_positions draws positions for pos={drawable}; "
                             f"pos={cfg.pos} has none to draw: set model.random_positions=null")

    @classmethod
    def longest(cls, cfg: ModelConfig) -> int | None:
        """How many positions a model of cfg can place (None: any number), which bounds evaluation past its
        block_size: learned positions end with their table."""
        return None

    def embed(self, x: torch.Tensor, start: Start) -> torch.Tensor:
        """Token embeddings (B, T, C) -> embeddings with absolute positions added."""
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, start: Start) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries (B, H, T, D) and keys (B, H_kv, T, D) of positions start..start+T-1 (or drawn ones)."""
        return q, k

    def score_bias(self, q_len: int, k_len: int, start: int, heads: int,
                   device: torch.device) -> torch.Tensor | None:
        """An additive (heads, q_len, k_len) bias on attention scores, or None. Query i sits at
        position start + i relative to key 0 (keys end where the queries end)."""
        return None


def table_size(cfg: ModelConfig) -> int:
    """Positions a table must hold: the block, or the longer range random positions are drawn from."""
    return max(cfg.block_size, cfg.random_positions or 0)


class LearnedPositional(Positional):
    """GPT-2's learned absolute position embeddings."""

    drawable = True

    def __init__(self, positions: int, dim: int) -> None:
        super().__init__()
        self.table = nn.Embedding(positions, dim)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> LearnedPositional:
        return cls(table_size(cfg), cfg.dim)

    @classmethod
    def longest(cls, cfg: ModelConfig) -> int | None:
        return table_size(cfg)

    def embed(self, x: torch.Tensor, start: Start) -> torch.Tensor:
        return x + self.table(span(start, x.shape[1], x.device))


class SinusoidalPositional(Positional):
    """Fixed sines and cosines of geometrically spaced frequencies added to the embeddings, scaled to the
    embeddings' initial RMS (model.init): at amplitude 1 (RMS 0.71 against the tokens' 0.02) the positions drowned the
    tokens and position_tasks' copying barely trained (docs/model.md). Vaswani et al. scale the embeddings up by
    sqrt(dim) instead; with a tied head that would scale the logits too."""

    drawable = True

    def __init__(self, positions: int, dim: int, base: float = 10000.0, rms: float = INIT_STD) -> None:
        super().__init__()
        angles = torch.outer(torch.arange(positions).float(), _inverse_frequencies(dim, base))  # (P, C/2)
        table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :dim]  # (P, C), interleaved
        self.register_buffer("table", table * rms * 2 ** 0.5, persistent=False)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> SinusoidalPositional:
        return cls(table_size(cfg), cfg.dim, rms=EMBEDDING_STD[cfg.init])

    def embed(self, x: torch.Tensor, start: Start) -> torch.Tensor:
        if isinstance(start, torch.Tensor):
            return x + self.table[start].to(x.dtype)  # (B, T, C)
        return x + self.table[start:start + x.shape[1]].to(x.dtype)


def _inverse_frequencies(dim: int, base: float) -> torch.Tensor:
    """(ceil(dim / 2),) frequencies base^(-2i/dim), from one turn per position down to very slow."""
    return 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)


class RotaryPositional(Positional):
    """RoPE: rotate each feature pair (i, i + D/2) of queries and keys by a position-dependent angle,
    so that q.k depends only on the distance between positions. Angles are computed for the head
    width they are given, so every variant (one wide head, decoupled MLA keys) can use it."""

    rotates = True
    drawable = True

    def __init__(self, base: float = 10000.0) -> None:
        super().__init__()
        self.base = base
        # (cos, sin) tables per (head width, device), each (positions, D), grown on demand: computing the
        # angles afresh for every layer's queries and keys cost ~13% of a training step at nanoGPT's CPU shapes.
        self._tables: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> RotaryPositional:
        return cls(cfg.rope_base)

    @classmethod
    def validate(cls, cfg: ModelConfig, rotated: tuple[int, str, str]) -> None:
        super().validate(cfg, rotated)
        width, settings, fix = rotated
        if width % 2:
            raise ValueError(f"pos=rope rotates feature pairs, so it needs an even width; attention={cfg.attention} "
                             f"rotates {settings}={width}: {fix}")

    def _angles(self, width: int, end: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the angles of positions 0..end-1 (at least), each (positions, width)."""
        cos, sin = self._tables.get((width, device), (None, None))
        if cos is None or cos.shape[0] < end:
            # Built for twice the positions asked, so the decode steps after a prompt find theirs: built for the
            # prompt alone, the first step after 16k tokens rebuilt it (6 ms, where a step of linear takes 1).
            # Built as normal tensors even while generating under inference mode: kept for later calls, an inference
            # tensor would be refused by autograd in the next training step ("cannot be saved for backward").
            with torch.inference_mode(False):
                positions = torch.arange(max(2 * end, 256), device=device, dtype=torch.float32)
                angles = torch.outer(positions, _inverse_frequencies(width, self.base).to(device))  # (P, D/2)
                angles = torch.cat([angles, angles], dim=-1)  # (P, D)
                cos, sin = self._tables[(width, device)] = angles.cos(), angles.sin()
        return cos, sin

    def rotate(self, q: torch.Tensor, k: torch.Tensor, start: Start) -> tuple[torch.Tensor, torch.Tensor]:
        T, D = q.shape[-2:]
        if isinstance(start, torch.Tensor):  # drawn positions, one row per sequence
            cos, sin = self._angles(D, int(start.max()) + 1, q.device)
            cos, sin = cos[start].unsqueeze(1).to(q.dtype), sin[start].unsqueeze(1).to(q.dtype)  # (B, 1, T, D)
        else:
            cos, sin = self._angles(D, start + T, q.device)
            cos, sin = cos[start:start + T].to(q.dtype), sin[start:start + T].to(q.dtype)  # (T, D), shared by q and k
        return _turn(q, cos, sin), _turn(k, cos, sin)


def _turn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each feature pair (i, i + D/2) of x (..., T, D) by the angles whose cos/sin are (T, D) or
    (B, 1, T, D)."""
    # Heads arrive as a transposed view; bf16 elementwise maths on one runs unvectorised on a CPU (0.44 against
    # 0.16 ms with the copy, (64, 4, 41, 16) on one AMD EPYC thread).
    x = x.contiguous()
    first, second = x.chunk(2, dim=-1)  # (..., T, D) -> two (..., T, D/2)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


def alibi_slopes(heads: int) -> torch.Tensor:
    """(heads,) ALiBi slopes as the paper sets them: 2^(-8h/H) for h = 1..H when H is a power of two;
    otherwise those of the power of two below H, then every other slope of the next power of two up
    (the in-between ones) until there are H."""
    below = 2 ** (heads.bit_length() - 1)
    slopes = 2.0 ** (-8.0 * torch.arange(1, below + 1) / below)
    between = 2.0 ** (-8.0 * torch.arange(1, 2 * below + 1, 2) / (2 * below))
    return torch.cat([slopes, between[:heads - below]])


class AlibiPositional(Positional):
    """ALiBi: no embedding at all; each head h subtracts slope_h * distance from its scores, with
    geometric slopes (2^(-8h/H) for H a power of two) so some heads look far and some only nearby."""

    biases_scores = True

    def score_bias(self, q_len: int, k_len: int, start: int, heads: int, device: torch.device) -> torch.Tensor:
        slopes = alibi_slopes(heads).to(device)  # (H,)
        queries = torch.arange(start, start + q_len, device=device)
        distance = (queries[:, None] - torch.arange(k_len, device=device)[None, :]).clamp(min=0)  # (T, S)
        # Future keys (negative distance) are masked anyway; clamping keeps their bias finite.
        return -slopes[:, None, None] * distance  # (H, T, S)


class AtPositions(Positional):
    """`encoding` read at drawn positions (B, T), whatever start it is asked for: what training passes to the
    embedding and every block when model.random_positions is set (no cache is involved in training)."""

    def __init__(self, encoding: Positional, positions: torch.Tensor) -> None:
        super().__init__()
        self.encoding, self.positions = encoding, positions
        self.rotates = encoding.rotates

    def embed(self, x: torch.Tensor, start: Start) -> torch.Tensor:
        return self.encoding.embed(x, self.positions)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, start: Start) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoding.rotate(q, k, self.positions)


POSITIONAL: dict[str, type[Positional]] = {
    "none": Positional,
    "learned": LearnedPositional,
    "sinusoidal": SinusoidalPositional,
    "rope": RotaryPositional,
    "alibi": AlibiPositional,
}
