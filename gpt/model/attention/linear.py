"""Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): softmax(q.k) is
replaced by phi(q).phi(k) with the positive feature map phi = elu + 1, so the past folds into a
fixed-size state and generation needs constant memory per token. Prompts run in the chunkwise-parallel
form (as in Yang et al. 2024, "Gated Linear Attention"), linear in their length. An optional short causal
convolution before the projections (Based, Arora et al. 2024) lets a key carry the token before it."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from gpt.model.attention.mha import MultiHeadAttention
from gpt.model.config import ModelConfig
from gpt.model.norm import RMSNorm
from gpt.model.positional import POSITIONAL, Positional

# Added to each normaliser: with few features, elu + 1 of very negative queries and keys makes it vanish, and the
# division then overflows (loss NaN under bf16 with 2 features per head).
EPS = 1e-6
CHUNK = 64  # positions per chunk of a prompt: dense (CHUNK x CHUNK) products inside, the state between chunks


class LinearState:
    """The recurrent state of one layer: sum of phi(k) v^T (B, H, F, D), of phi(k) (B, H, F), and the inputs the
    short convolution still reads (B, width - 1, C; no positions without one)."""

    def __init__(self, batch: int, heads: int, features: int, head_dim: int, remembered: int, dim: int,
                 device: torch.device, dtype: torch.dtype) -> None:
        self.kv = torch.zeros(batch, heads, features, head_dim, device=device, dtype=dtype)
        self.k = torch.zeros(batch, heads, features, device=device, dtype=dtype)
        self.recent = torch.zeros(batch, remembered, dim, device=device, dtype=dtype)
        self.batch = batch
        self.length = 0

    @property
    def form(self) -> str:
        heads, features, head_dim = self.kv.shape[1:]
        return f"LinearState(heads={heads}, features={features}, values={head_dim}, conv_inputs={self.recent.shape[1]})"

    def reset(self) -> None:
        self.kv.zero_()
        self.k.zero_()
        self.recent.zero_()
        self.length = 0


class LinearAttention(MultiHeadAttention):
    """`mha`'s projections, queries and keys narrowed (or widened) to `features` per head;
    output_i = sum_j<=i phi(q_i).phi(k_j) v_j / sum_j<=i phi(q_i).phi(k_j), whose state per head is
    features x head_dim. A prompt is cut into chunks: within one, the masked (chunk x chunk) products;
    from the chunks before it, the state they left. RoPE rotates phi(q) and phi(k) in the numerator only
    (as RoFormer does), so the normaliser stays positive. It never forms softmax weights; asked to keep
    weights, it keeps the implied ones, phi(q_i).phi(k_j) / normaliser_i, whose rows sum to 1 unless
    RoPE rotated the numerator. With `conv` > 0, each channel of the input is first mixed with its own last
    conv - 1 values (causal, depthwise), so a key can hold the token before it: recall's key-value binding without
    a softmax to find the previous token."""

    own_settings = ("linear_features", "linear_conv")

    has_weights = False

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, bias: bool = False, qk_norm: bool = False,
                 features: int | None = None, norm_eps: float = 1e-5, conv: int = 0) -> None:
        super().__init__(dim, heads, dropout, bias, qk_norm, norm_eps=norm_eps)
        self.features = features or self.head_dim
        self.conv = nn.Conv1d(dim, dim, conv, groups=dim, bias=bias) if conv else None
        self.query = nn.Linear(dim, heads * self.features, bias=bias)
        self.key = nn.Linear(dim, heads * self.features, bias=bias)
        if qk_norm:
            self.q_norm, self.k_norm = RMSNorm(self.features, norm_eps), RMSNorm(self.features, norm_eps)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> LinearAttention:
        return cls(cfg.dim, cfg.heads, cfg.dropout, cfg.bias, cfg.qk_norm, cfg.linear_features, cfg.norm_eps,
                   cfg.linear_conv or 0)

    @classmethod
    def validate(cls, cfg: ModelConfig) -> None:
        if POSITIONAL[cfg.pos].biases_scores:
            raise ValueError(f"pos={cfg.pos} biases attention scores, which attention=linear never forms: "
                             "use pos=rope, learned, sinusoidal or none")
        if cfg.linear_features is not None and cfg.linear_features < 1:
            raise ValueError(f"linear_features={cfg.linear_features} must be a positive integer (or null for the "
                             "head width): set model.linear_features")
        if cfg.linear_conv is not None and (cfg.linear_conv < 0 or cfg.linear_conv == 1):
            raise ValueError(f"linear_conv={cfg.linear_conv} must be 0 (no convolution) or a width of at least 2 "
                             "positions: set model.linear_conv")

    @classmethod
    def rotated(cls, cfg: ModelConfig) -> tuple[int, str, str]:
        if cfg.linear_features is None:  # features as wide as a head
            return cfg.head_dim, "dim/heads", "set model.linear_features to an even width, or change model.dim or " \
                "model.heads"
        return cfg.linear_features, "linear_features", "set model.linear_features"

    def new_cache(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> LinearState:
        return LinearState(batch, self.heads, self.features, self.head_dim, self.remembered, self.dim, device, dtype)

    @property
    def remembered(self) -> int:
        """Inputs before a position that the convolution reads: its width - 1 (none without a convolution)."""
        return self.conv.kernel_size[0] - 1 if self.conv is not None else 0

    @property
    def dim(self) -> int:
        return self.heads * self.head_dim

    def cache_bytes(self, batch: int, positions: int, element_size: int) -> int:
        """features x head_dim (plus features for the normaliser) per head, and the convolution's last inputs,
        whatever the number of positions."""
        state = self.heads * self.features * (self.head_dim + 1) + self.remembered * self.dim
        return batch * state * element_size

    def convolve(self, x: torch.Tensor, cache: LinearState | None) -> torch.Tensor:
        """Each channel of x (B, T, C) mixed with its own `remembered` values before it: zeros before a
        sequence's start, or the cache's last inputs, which it then replaces. x itself without a convolution."""
        if self.conv is None:
            return x
        B, T, C = x.shape
        before = cache.recent if cache is not None else x.new_zeros(B, self.remembered, C)
        padded = torch.cat([before, x], dim=1)  # (B, width - 1 + T, C)
        if cache is not None:
            cache.recent.copy_(padded[:, T:])
        return self.conv(padded.transpose(1, 2)).transpose(1, 2)  # (B, C, width - 1 + T) -> (B, T, C)

    def forward(self, x: torch.Tensor, pos: Positional, cache: LinearState | None = None) -> torch.Tensor:
        B, T, C = x.shape
        start = cache.length if cache is not None else 0
        q, k, v = self.project(self.convolve(x, cache))  # (B, H, T, F), (B, H, T, F), (B, H, T, D)
        q, k = F.elu(self.q_norm(q)) + 1, F.elu(self.k_norm(k)) + 1  # positive features
        q_rot, k_rot = pos.rotate(q, k, start)
        numerator, folded = chunkwise(q_rot, k_rot, v, cache.kv if cache is not None else None)  # (B, H, T, D)
        # Summed along positions in the projection's (B, T, H, F) layout: compiled, a cumsum over dim 2 of the
        # transposed view corrupted the heap (torch 2.13, CPU inductor).
        k_sums = k.transpose(1, 2).cumsum(dim=1).transpose(1, 2)  # (B, H, T, F): sum_j<=i phi(k_j) here
        if cache is not None:
            k_sums = k_sums + cache.k.unsqueeze(2)  # (B, H, F) -> (B, H, 1, F)
        normaliser = (q * k_sums).sum(-1) + EPS  # (B, H, T)
        if self.keep_weights:  # the implied weights: what multiplies each value of this chunk
            allowed = self.mask(T, T, 0, x.device)  # (T, T)
            products = (q_rot @ k_rot.transpose(-2, -1)).masked_fill(~allowed, 0.0)  # (B, H, T, T)
            self.weights = (products / normaliser.unsqueeze(-1)).detach()  # (B, H, T) -> (B, H, T, 1)
        if cache is not None:  # the state after these positions, written in place
            cache.kv.copy_(folded)  # (B, H, F, D)
            cache.k.copy_(k_sums[:, :, -1])  # (B, H, F)
            cache.length += T
        y = (numerator / normaliser.unsqueeze(-1)).transpose(1, 2).reshape(B, T, C)  # (B, H, T, D) -> (B, T, C)
        return self.resid_dropout(self.proj(y))


def chunkwise(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """sum_j<=i (q_i.k_j) v_j + q_i.state for features q, k (B, H, T, F) and values v (B, H, T, D), with the
    state (B, H, F, D) that earlier positions left (or None), and the state after these positions: chunks of
    CHUNK positions in parallel, each reading the sum of k_j v_j^T over the chunks before it."""
    B, H, T, _ = q.shape
    D = v.shape[-1]
    # A compiled graph takes the positions as one chunk: chunk arithmetic on a dynamic length compiles for minutes.
    if T <= CHUNK or torch.compiler.is_compiling():  # one chunk: the parallel form
        allowed = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # (T, T)
        # k.transpose(-2, -1): (B, H, T, F) -> (B, H, F, T)
        out, folded = (q @ k.transpose(-2, -1)).masked_fill(~allowed, 0.0) @ v, k.transpose(-2, -1) @ v
        return (out, folded) if state is None else (out + q @ state, folded + state)  # (B, H, T, D), (B, H, F, D)
    size = CHUNK
    pad = -T % size  # zero keys and values at the end add nothing; their outputs are dropped
    q, k, v = (F.pad(t, (0, 0, 0, pad)).reshape(B, H, -1, size, t.shape[-1]) for t in (q, k, v))  # (B, H, N, c, F|D)
    allowed = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()  # (c, c)
    within = (q @ k.transpose(-2, -1)).masked_fill(~allowed, 0.0) @ v  # (B, H, N, c, D)
    per_chunk = k.transpose(-2, -1) @ v  # (B, H, N, F, D)
    after = per_chunk.cumsum(dim=2)  # (B, H, N, F, D): what each chunk and those before it left
    if state is not None:
        after = after + state.unsqueeze(2)  # (B, H, F, D) -> (B, H, 1, F, D)
    before = after - per_chunk
    return (within + q @ before).view(B, H, -1, D)[:, :, :T], after[:, :, -1]  # (B, H, T, D), (B, H, F, D)
