"""ModelConfig: every size and part name of a GPT; its fields are validated when it is built (the parts it names,
when a GPT is built: gpt.model.gpt.check_parts). Its defaults are exactly what
`python train.py` trains (configs/model/small.yaml with pos=learned and attention=mha; tests/test_configs.py)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpt.validate import PositiveFloat, PositiveInt, Probability, check_choice, check_fields, check_known_fields

INIT_STD = 0.02  # GPT-2's initial std of every weight matrix and embedding
# The initial std of token embeddings, and of the additive position tables beside them, under each model.init.
EMBEDDING_STD = {"gpt2": INIT_STD, "torch": 1.0}
# nanoGPT's GPTConfig names for fields a port of its code passes first.
NANOGPT_NAMES = {"n_layer": "layers", "n_head": "heads", "n_embd": "dim"}


@dataclass(frozen=True)
class ModelConfig:
    """What a GPT is: its sizes and the name of each part, frozen. The fields are the `model.*` keys of
    `python train.py`; `ModelConfig(vocab_size=...)` is the model it trains by default. A field of the wrong type or
    range is a ValueError naming it and the fix; part names are checked when a GPT is built."""

    vocab_size: PositiveInt
    layers: PositiveInt = 2
    heads: PositiveInt = 4
    dim: PositiveInt = 128
    block_size: PositiveInt = 16
    dropout: Probability = 0.0
    attention: str = "mha"
    pos: str = "learned"
    norm: str = "rmsnorm"
    mlp: str = "gelu"
    mlp_ratio: PositiveFloat = 4.0
    bias: bool = False
    norm_eps: PositiveFloat = 1e-5
    rope_base: PositiveFloat = 10000.0
    # Training draws each sequence's positions as a sorted random subset of 0..random_positions-1 (Ruoss et al.
    # 2023), so an encoding meets positions past the lengths it trains on; evaluation uses 0..T-1. None: 0..T-1.
    random_positions: PositiveInt | None = None
    kv_heads: PositiveInt | None = None  # gqa: key/value heads shared by the query heads (None: as many as heads)
    window: int | None = None  # sliding_window: positions each query sees, itself included (None: 8)
    kv_latent_dim: int | None = None  # mla: width of the latent keys and values are rebuilt from (None: 32)
    linear_features: int | None = None  # linear: features per head of queries and keys (None: the head width)
    # linear: width of a short causal convolution over each channel first (Based); 0 or None: none
    linear_conv: int | None = None
    # How softmax attention is computed: "sdpa", torch's fused kernel, or "math", the written-out maths to read and
    # step through. sdpa is the default: it trained every shape measured on the 2-core dev CPU as fast or faster
    # (1.01-1.41x in fp32 and bf16, bench/kernel_speed.py) and forms no (T, S) weights, so long prompts fit. The
    # viewer and attention_maps always get weights, whatever the kernel.
    kernel: str = "sdpa"
    qk_norm: bool = False  # RMSNorm on each head's queries and keys
    tie_embeddings: bool = True  # the LM head reuses the token embedding matrix (Press & Wolf, 2017)
    # How weights start. "gpt2": every matrix and embedding N(0, 0.02), the projections that write into the residual
    # stream shrunk by depth (Radford et al. 2019, set for width 768). "torch": torch's own layer defaults, which
    # follow the width (nn.Linear uniform within 1/sqrt(fan_in), embeddings N(0, 1)). At width 64 they let a 2-layer
    # model leave recall's plateau (answering by elimination) within 400 steps, where gpt2's stays on it past 1,200
    # (docs/tasks.md, "Initialisation").
    init: str = "gpt2"
    trace_shapes: bool = False  # print every module's output shape during the first forward pass

    def __new__(cls, *args: Any, **values: Any) -> ModelConfig:
        # Before the generated __init__, whose TypeError ("unexpected keyword argument 'n_layer'") named no field.
        check_known_fields(cls, values, "model", NANOGPT_NAMES)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        # The fields' own types and ranges; whether the named parts exist and suit each other is checked where the
        # parts are (gpt.model.gpt.check_parts, when a GPT is built), since the parts read this config.
        check_fields(self)
        check_choice("model.init", self.init, EMBEDDING_STD)
        if self.random_positions is not None and self.random_positions < self.block_size:
            raise ValueError(f"model.random_positions={self.random_positions} is below block_size={self.block_size}: "
                             "positions are drawn from 0..random_positions-1, so raise it to at least block_size")
        if int(self.mlp_ratio * self.dim) < 1:
            raise ValueError(f"mlp_ratio={self.mlp_ratio} makes the MLP 0 wide at dim={self.dim}: raise "
                             f"model.mlp_ratio to at least {1 / self.dim:g}")
        if self.dim % self.heads:
            raise ValueError(f"heads={self.heads} does not divide dim={self.dim}: pick model.heads from "
                             f"{[h for h in range(1, self.dim + 1) if self.dim % h == 0 and h <= 64]}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head: dim / heads."""
        return self.dim // self.heads

    def to_dict(self) -> dict[str, Any]:
        """Every field by name, as model.pt stores it; from_dict reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """A config from field names and values; a name it lacks is a ValueError naming the one meant."""
        return cls(**values)
