"""Causal self-attention variants behind one interface (gpt/model/attention/base.py), one module per family,
and the ATTENTION registry keyed by the Hydra option `attention=<name>` (configs/attention/<name>.yaml); the
kernels that compute softmax attention are a registry of their own (KERNELS, model.kernel)."""
from __future__ import annotations

from torch import nn

from gpt.model.attention.heads import MultiHeadWrapper, SingleHeadAttention, WeightlessAttention
from gpt.model.attention.latent import MultiHeadLatentAttention
from gpt.model.attention.linear import LinearAttention
from gpt.model.attention.mha import FusedMultiHeadAttention, MultiHeadAttention
from gpt.model.attention.sparse import GroupedQueryAttention, MultiQueryAttention, SlidingWindowAttention
from gpt.model.attention.torch_mha import TorchMultiheadAttention

ATTENTION: dict[str, type[nn.Module]] = {
    "weightless": WeightlessAttention,
    "single_head": SingleHeadAttention,
    "mha_wrapper": MultiHeadWrapper,
    "mha": MultiHeadAttention,
    "mha_fused": FusedMultiHeadAttention,
    "torch_mha": TorchMultiheadAttention,
    "gqa": GroupedQueryAttention,
    "mqa": MultiQueryAttention,
    "sliding_window": SlidingWindowAttention,
    "mla": MultiHeadLatentAttention,
    "linear": LinearAttention,
}
