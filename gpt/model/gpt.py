"""GPT: token embeddings -> positional encoding -> pre-norm blocks -> final norm -> LM head, tied to the
embeddings unless model.tie_embeddings=false (Radford et al. 2019, with the parts chosen by ModelConfig)."""
from __future__ import annotations

import math
import numbers
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, fields, replace

import torch
from torch import nn

from gpt.model.attention import ATTENTION
from gpt.model.attention.base import Cache
from gpt.model.attention.kernels import KERNELS
from gpt.model.block import Block
from gpt.model.config import INIT_STD, ModelConfig
from gpt.model.mlp import MLP
from gpt.model.norm import NORM
from gpt.model.positional import POSITIONAL, AtPositions, random_positions
from gpt.validate import check_choice, is_kind


def check_parts(cfg: ModelConfig) -> None:
    """Raise ValueError naming the fix unless every part cfg names exists and each suits the others (a window of
    at least one position, ALiBi with an attention that forms scores, ...): each part checks its own needs."""
    for field_name, registry in (("attention", ATTENTION), ("pos", POSITIONAL), ("norm", NORM), ("mlp", MLP),
                                 ("kernel", KERNELS)):
        check_choice(field_name, getattr(cfg, field_name), registry)
    if foreign := foreign_settings(cfg):
        name = foreign[0]
        readers = [attention for attention, part in ATTENTION.items() if name in part.own_settings]
        raise ValueError(f"{name}={getattr(cfg, name)} changes nothing under attention={cfg.attention}, which does not "
                         f"read it: drop {name}, or pass attention={' or '.join(map(repr, readers))}, which does")
    POSITIONAL[cfg.pos].validate(cfg, ATTENTION[cfg.attention].rotated(cfg))
    ATTENTION[cfg.attention].validate(cfg)


def foreign_settings(cfg: ModelConfig) -> list[str]:
    """The fields cfg sets that only other attention variants read (their `own_settings`, None unless set): kv_heads
    under mha, which a ModelConfig built in Python would otherwise carry unread."""
    own = ATTENTION[cfg.attention].own_settings if cfg.attention in ATTENTION else ()  # check_parts refuses others
    others = {name for part in ATTENTION.values() for name in part.own_settings} - set(own)
    return [name for name in sorted(others) if getattr(cfg, name) is not None]


def without_foreign_settings(cfg: ModelConfig) -> ModelConfig:
    """cfg with the settings its attention does not read unset: a model.pt saved when kv_heads defaulted to 2 under
    every variant, or a sweep's `++model.kv_heads`, which its jobs of other variants ignore."""
    return replace(cfg, **dict.fromkeys(foreign_settings(cfg)))


def settings_read(cfg: ModelConfig) -> set[str]:
    """The fields of `cfg` the model's parts read, building a GPT from it and training a step of it (check_parts's
    own reads, which look at every part's name, left out): one outside them changes nothing in the model, such as
    model.rope_base under pos=alibi or model.qk_norm under attention=torch_mha. Read on a one-layer copy with two
    ids (one where the block holds one), as every layer reads the same fields."""
    names = {field.name for field in fields(ModelConfig)}
    reads: Counter[str] = Counter()

    class Reading(ModelConfig):
        def __getattribute__(self, name: str) -> object:
            if name in names:
                reads[name] += 1
            return super().__getattribute__(name)

    traced = Reading(**{**asdict(cfg), "layers": 1, "vocab_size": 2, "trace_shapes": False})
    reads.clear()  # of its own checks as it was made
    check_parts(traced)
    checked = Counter(reads)
    reads.clear()
    with torch.random.fork_rng(devices=[]):  # its init, dropout and positions leave a seeded run's stream as it was
        ids = torch.zeros(1, min(2, cfg.block_size), dtype=torch.long)
        GPT(traced).train()(ids)  # check_parts once more, then what the parts read
    return {name for name in names if reads[name] > checked[name]}


IDS_DTYPES = (torch.long, torch.int)  # what nn.Embedding looks up


def check_ids(idx: torch.Tensor) -> None:
    """Raise ValueError naming the fix unless idx is integer token ids (B, T) with B, T >= 1: torch's own errors
    for a list, float ids, a single sequence (T,) or an empty prompt or batch ("'list' object has no attribute",
    "Expected tensor for argument #1 'indices'", "tuple index out of range", "cannot reshape tensor of 0
    elements") name neither what is expected nor the fix."""
    if not isinstance(idx, torch.Tensor):
        raise ValueError(f"token ids are a {type(idx).__name__}: pass a (batch, length) tensor of integer ids, "
                         "e.g. torch.tensor([ids])")
    if idx.dtype not in IDS_DTYPES:
        raise ValueError(f"token ids of dtype {idx.dtype}: pass integer ids, e.g. ids.long()")
    if idx.dim() != 2 or 0 in idx.shape:
        raise ValueError(f"token ids of shape {tuple(idx.shape)}: pass a (batch, length) tensor with batch and "
                         "length >= 1, e.g. ids[None] for one sequence")


def outside_vocabulary(idx: torch.Tensor, vocab_size: int) -> ValueError:
    """The one-line error for token ids (some of them outside 0..vocab_size-1) that a model cannot embed."""
    return ValueError(f"token ids {int(idx.min())}..{int(idx.max())} fall outside this model's vocabulary of "
                      f"{vocab_size} (ids 0..{vocab_size - 1}): encode with the model's own tokenizer, or build the "
                      "model with vocab_size=tokenizer.vocab_size")


def too_long(cached: int, new: int, block_size: int) -> ValueError:
    """The one-line error for `new` token ids fed after `cached` ones past what the model attends to."""
    if cached:
        return ValueError(f"sequence of {cached + new} tokens ({cached} cached, {new} new) exceeds "
                          f"block_size={block_size}: reset the caches and feed the last {block_size} tokens, as "
                          "gpt.generate does")
    return ValueError(f"sequence of {new} tokens exceeds block_size={block_size}: feed the last {block_size} "
                      f"(ids[:, -{block_size}:]), as gpt.generate does, or build the model with block_size={new}")


def check_caches(caches: object, layers: int, batch: int, form: str) -> None:
    """Raise ValueError naming new_caches unless `caches` is a list (or tuple) of one cache per layer, each of the
    `form` this model's layers take: another model's met "list index out of range" deep in the forward where it had
    fewer layers, and was used in part, silently, where it had more; one cache alone was "'KVCache' object is not
    subscriptable"; another variant's or width's failed deep in a layer, or ran silently wrong (mha's keys broadcast
    into mqa's one head, a ring of 4 slots serving a window of 8)."""
    if not isinstance(caches, (list, tuple)):
        raise ValueError(f"caches are a {type(caches).__name__}: pass this model's new_caches({batch}), a list with "
                         "one per layer")
    if len(caches) != layers:
        raise ValueError(f"{len(caches)} cache{'s' * (len(caches) != 1)} given for this model's {layers} layers: pass "
                         f"this model's new_caches({batch}), one per layer")
    for i, cache in enumerate(caches):
        given = getattr(cache, "form", None)
        if given != form:
            given = given or f"a {type(cache).__name__}"
            raise ValueError(f"caches made for another model: layer {i}'s cache is {given}, where this model's layers "
                             f"take {form}: make them with this model's new_caches({batch})")


def claim_caches(caches: list[Cache], model: nn.Module, batch: int) -> None:
    """Raise ValueError naming the fix where a cache holds positions another model fed it; then mark every cache as
    `model`'s. Caches of the same form from another model were read silently, its keys and values taken for this
    model's (empty ones are taken: they hold nothing of the other model)."""
    for i, cache in enumerate(caches):
        fed_by = getattr(cache, "fed_by", None)  # a weak reference to the model that last fed it
        if cache.length and fed_by is not None and fed_by() is not model:
            raise ValueError(f"caches filled by another model: layer {i}'s holds {cache.length} positions of another "
                             "model's keys and values, which this model would read as its own: call reset() on each "
                             f"cache first, or make them with this model's new_caches({batch})")
        cache.fed_by = weakref.ref(model)


def check_cache_dtype(dtype: torch.dtype, model_dtype: torch.dtype, device_type: str) -> None:
    """Raise ValueError naming the fix unless caches of `dtype` hold what the model's layers hand them: keys in
    another dtype than the queries failed at the first prompt in torch's own error, deep in attention. Casting them
    back instead would copy every cached key at each decode step, and sum linear attention's state in less precision
    than the model computes in."""
    if dtype == model_dtype:  # also on devices autocast does not know (meta), which would raise when asked
        return
    if not (torch.is_autocast_enabled(device_type) and dtype == torch.get_autocast_dtype(device_type)):
        raise ValueError(f"new_caches(dtype={dtype}): this model computes in {model_dtype}, the dtype its layers hand "
                         f"their caches: pass dtype={model_dtype} (or leave dtype out), or convert the model first "
                         f"with model.to({dtype}), or make the caches and run it under "
                         f"torch.autocast('{device_type}', dtype={dtype})")


def refuse_an_untied_head(model: nn.Module, state_dict: dict[str, torch.Tensor], prefix: str, *_: object) -> None:
    """A tied model's load_state_dict pre-hook: refuse weights whose head is not their embedding. Both load into the
    one tied tensor, the head last, so an untied model's weights loaded as "All keys matched successfully" and the
    model read its input through its head."""
    embedding, head = state_dict.get(f"{prefix}tok_emb.weight"), state_dict.get(f"{prefix}head.weight")
    # Plain tensors only: a sharded checkpoint's pieces (DTensor, ShardedTensor) cannot be compared here.
    if not all(type(t) in (torch.Tensor, nn.Parameter) and not t.is_meta for t in (embedding, head)):
        return
    if embedding.shape == head.shape and not torch.equal(embedding, head):
        raise ValueError(f"these weights have a head of their own ({prefix}head.weight is not {prefix}tok_emb.weight),"
                         " and this model ties its head to its embedding: build it with tie_embeddings=False, as the "
                         "weights were trained")


class GPT(nn.Module):
    """A GPT built from a ModelConfig: `GPT(cfg)(ids)` maps token ids (B, T) to next-token logits
    (B, T, vocab_size). Generate with `gpt.generate(model.eval(), ids, max_new_tokens)`; an unknown part name or
    parts that do not suit each other are a ValueError when it is built."""

    def __init__(self, cfg: ModelConfig) -> None:
        if not isinstance(cfg, ModelConfig):  # a dict read from YAML was "'dict' object has no attribute 'attention'"
            raise ValueError(f"GPT takes a ModelConfig, not a {type(cfg).__name__}: GPT(ModelConfig(vocab_size=...)), "
                             "or ModelConfig.from_dict(values) for a mapping")
        check_parts(cfg)
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.pos = POSITIONAL[cfg.pos].from_config(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = NORM[cfg.norm](cfg.dim, cfg.norm_eps, cfg.bias)
        self.head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        # What caches each layer takes, found once: a cache made at every forward, even on meta, would cost each step.
        self.cache_form = self.blocks[0].attn.new_cache(1, 1, torch.device("meta"), torch.float32).form
        if cfg.tie_embeddings:
            self.head.weight = self.tok_emb.weight  # weight tying (Press & Wolf, 2017)
            self.register_load_state_dict_pre_hook(refuse_an_untied_head)
        self.shapes_pending = cfg.trace_shapes  # print shapes through the first forward pass only
        if cfg.init == "gpt2":  # "torch" keeps the defaults each layer was built with
            self.apply(self._init_weights)
            # GPT-2: projections that write into the residual stream shrink with depth so its variance
            # stays constant however many blocks add to it.
            for name, param in self.named_parameters():
                if name.endswith("proj.weight"):
                    nn.init.normal_(param, mean=0.0, std=INIT_STD / math.sqrt(2 * cfg.layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.MultiheadAttention):  # its fused input projection is a bare parameter
            nn.init.normal_(module.in_proj_weight, mean=0.0, std=INIT_STD)

    def new_caches(self, batch: int, device: torch.device | None = None, dtype: torch.dtype | None = None,
                   max_len: int | None = None) -> list[Cache]:
        """One empty cache per block, holding up to max_len positions (block_size unless given), in the dtype the
        model computes in: its weights' (the default), or autocast's while the caches are made under autocast."""
        # torch.empty's TypeError named neither setting; batch 0 and max_len=0 (read as "not given") were accepted.
        if not (is_kind(batch, numbers.Integral) and batch >= 1):
            raise ValueError(f"new_caches(batch={batch!r}): batch must be an integer of at least 1")
        if max_len is not None and not (is_kind(max_len, numbers.Integral) and 1 <= max_len <= self.cfg.block_size):
            raise ValueError(f"new_caches(max_len={max_len!r}): max_len must be 1..{self.cfg.block_size}")
        weight = self.tok_emb.weight
        device = torch.device(device or weight.device)
        check_cache_dtype(dtype or weight.dtype, weight.dtype, device.type)
        return [block.attn.new_cache(batch, max_len or self.cfg.block_size, device, dtype or weight.dtype)
                for block in self.blocks]

    def forward(self, idx: torch.Tensor, caches: list[Cache] | None = None) -> torch.Tensor:
        """Token ids (B, T) -> logits (B, T, vocab_size). With caches, idx continues the cached positions."""
        check_ids(idx)
        if isinstance(caches, torch.Tensor):  # nanoGPT's model(x, targets): torch said "Boolean value of Tensor ..."
            raise ValueError("GPT(ids) takes no targets and returns logits alone (its second argument is the KV "
                             "caches): compute the loss as F.cross_entropy(logits.flatten(0, 1), targets.flatten())")
        if caches is not None:
            check_caches(caches, len(self.blocks), idx.shape[0], self.cache_form)
            if not torch.compiler.is_compiling():  # a compiled step is fed views of the caches, not the caches
                claim_caches(caches, self, idx.shape[0])
        device = self.tok_emb.weight.device
        if idx.device != device:  # torch's "Expected all tensors to be on the same device" came from the embedding
            raise ValueError(f"token ids on {idx.device}, this model on {device}: move the ids to the model with "
                             f"ids.to('{device}')")
        if self.shapes_pending:
            self.shapes_pending = False
            with print_shapes(self, idx):
                return self(idx, caches)
        start = caches[0].length if caches else 0
        if caches and caches[0].batch != idx.shape[0]:  # torch's own error was a shape mismatch deep in a layer
            raise ValueError(f"caches built for a batch of {caches[0].batch} fed token ids of batch {idx.shape[0]}: "
                             f"build caches for these ids with model.new_caches({idx.shape[0]})")
        if start + idx.shape[1] > self.cfg.block_size:  # the bare fact named no way out
            raise too_long(start, idx.shape[1], self.cfg.block_size)
        pos = self.pos
        if self.training and self.cfg.random_positions and not caches:  # Ruoss et al. 2023; evaluation uses 0..T-1
            pos = AtPositions(self.pos, random_positions(*idx.shape, self.cfg.random_positions, idx.device))
        try:
            tokens = self.tok_emb(idx)  # (B, T, C)
        except IndexError:  # torch's "index out of range in self" named nothing; caught, a step costs nothing more
            raise outside_vocabulary(idx, self.cfg.vocab_size) from None
        x = self.drop(pos.embed(tokens, start))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, pos, caches[i] if caches else None)
        return self.head(self.norm(x))  # (B, T, V)

    def cache_bytes(self, batch: int, positions: int, dtype: torch.dtype | None = None) -> int:
        """Bytes every layer's cache holds for `positions` tokens, by each variant's formula."""
        element_size = (dtype or self.tok_emb.weight.dtype).itemsize
        return sum(block.attn.cache_bytes(batch, positions, element_size) for block in self.blocks)

    @torch.no_grad()
    def attention_maps(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """Attention weights (B, H, T, T) of every layer for token ids (B, T), for plotting, as the model attends
        in evaluation whatever its mode: no dropout, positions 0..T-1. Variants that never form them (has_weights
        False) compute them the explicit way while this call lasts."""
        was_training = self.training
        self.eval()  # a model fresh from GPT(cfg) is in training mode: its maps would change from call to call
        for block in self.blocks:
            block.attn.keep_weights = True
        try:
            self(idx)
            return [block.attn.weights for block in self.blocks]
        finally:
            self.train(was_training)
            for block in self.blocks:
                block.attn.keep_weights, block.attn.weights = False, None

    def num_params(self) -> int:
        """Trainable parameters; a tied embedding and head count once, an untied head on its own."""
        return sum(p.numel() for p in self.parameters())


@contextmanager
def print_shapes(model: nn.Module, idx: torch.Tensor) -> Iterator[None]:
    """Print each submodule's input and output shapes as a forward pass runs (model.trace_shapes=true);
    hooks fire as modules finish, so a module's parts print before the module itself."""
    def hook(name: str) -> Callable[[nn.Module, tuple[object, ...], object], None]:
        def show(module: nn.Module, inputs: tuple[object, ...], output: object) -> None:
            shapes = [tuple(t.shape) for t in inputs if isinstance(t, torch.Tensor)]
            out = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
            print(f"{name:<28} {type(module).__name__:<26} {', '.join(map(str, shapes)):<16} -> {out}")
        return show

    print(f"{'idx':<28} {'token ids':<26} {'':<16} -> {tuple(idx.shape)}")
    handles = [module.register_forward_hook(hook(name)) for name, module in model.named_modules() if name]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
