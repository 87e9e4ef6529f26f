"""The offline attention viewer: every layer and head's weights over a prompt and the tokens generated after it,
beside the mask and score bias the variant applied, with per-head numbers that teach (entropy, share on the
previous and first token, induction score), written into one HTML page with its data and script inlined."""
from __future__ import annotations

import html
import inspect
import json
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from gpt.data.tokenizers.base import Tokenizer
from gpt.evaluation.maps import HIDDEN, attention_parts, token_label, visible_keys
from gpt.inference.generation import check_sampling, generate
from gpt.inference.text import TextModel
from gpt.model.attention import ATTENTION
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT
from gpt.model.positional import POSITIONAL

DECIMALS = 4  # weights as embedded: rows still sum to 1 within T * 5e-5
INDUCTION_TOKENS = 16  # length of the random sequence that is shown twice to measure induction
EXPLICIT_NOTE = ("Its ordinary forward never forms this matrix (torch's fused kernel, model.kernel=sdpa, or no softmax "
                 "at all); the weights shown are computed the explicit way for this view, and tests prove them equal "
                 "to what the fast path computes.")


def applied_mask(model: GPT, T: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What the variant applies over T positions: allowed (T, T) bool, and the score bias (H, T, T) or None.
    Every layer uses the same variant, so the first layer's answer holds for all."""
    device = model.tok_emb.weight.device
    parts = attention_parts(model.blocks[0].attn)
    biases = [b for b in (part.score_bias(model.pos, T, T, 0, device) for part in parts) if b is not None]
    return visible_keys(model, T), torch.cat(biases) if biases else None  # (T, T), (H, T, T)


def forms_weights(cfg: ModelConfig) -> bool:
    """Whether the model's ordinary forward forms the weight matrix: a softmax variant through the written-out maths."""
    return ATTENTION[cfg.attention].has_weights and cfg.kernel == "math"


def head_stats(weights: torch.Tensor) -> dict[str, list[float]]:
    """Per head of weights (H, T, T): mean entropy of a query's row (nats), and the mean share each query
    after the first puts on the token just before it and on the first token."""
    rows = weights.clamp(min=0.0)  # linear attention's implied weights may dip below zero under RoPE
    entropy = -(rows * rows.clamp(min=1e-12).log()).sum(-1).mean(-1)  # (H,)
    later = torch.arange(1, weights.shape[-1], device=weights.device)
    queries = max(1, len(later))  # a one-token view has no later query: its shares are 0
    return {"entropy": entropy.tolist(), "previous": (weights[:, later, later - 1].sum(-1) / queries).tolist(),
            "first": (weights[:, later, 0].sum(-1) / queries).tolist()}


def induction_scores(model: GPT, vocab_size: int, seed: int = 0) -> list[list[float]]:
    """Per layer and head, the mean weight a token in the second copy of a repeated random sequence puts on
    the token that followed its earlier occurrence: high in an induction head (Olsson et al. 2022)."""
    n = min(INDUCTION_TOKENS, model.cfg.block_size // 2)
    half = torch.randint(vocab_size, (n,), generator=torch.Generator().manual_seed(seed))
    idx = torch.cat([half, half]).unsqueeze(0).to(model.tok_emb.weight.device)  # (1, 2n)
    queries = torch.arange(n + 1, 2 * n)  # second copy, after its first token
    count = max(1, len(queries))  # a model too short to repeat a sequence scores 0
    return [(w[0][:, queries, queries - n + 1].sum(-1) / count).tolist() for w in model.attention_maps(idx)]


def rounded(t: torch.Tensor) -> list[Any]:
    return torch.round(t.double().cpu(), decimals=DECIMALS).tolist()  # in double, 0.4235 prints as 0.4235


def attention_view(model: GPT, tokenizer: Tokenizer, ids: list[int], prompt_len: int) -> dict[str, Any]:
    """The viewer's data for token ids (at most block_size of them), the first prompt_len being the prompt."""
    if not ids:
        raise ValueError("there are no tokens to view: pass a prompt")
    if len(ids) > model.cfg.block_size:
        raise ValueError(f"{len(ids)} tokens exceed block_size={model.cfg.block_size}: use a shorter prompt "
                         "or fewer new tokens")
    cfg = model.cfg
    maps = [w[0] for w in model.attention_maps(torch.tensor([ids], device=model.tok_emb.weight.device))]  # (H, T, T)
    allowed, bias = applied_mask(model, len(ids))
    per_head = [head_stats(w) for w in maps]
    forms = forms_weights(cfg)
    return {
        "attention": cfg.attention, "pos": cfg.pos, "forms_weights": forms,
        "notes": {"attention": inspect.cleandoc(ATTENTION[cfg.attention].__doc__ or "") + ("" if forms else
                                                                                        " " + EXPLICIT_NOTE),
                  "pos": inspect.cleandoc(POSITIONAL[cfg.pos].__doc__ or "")},
        "tokens": [token_label(tokenizer.decode([i])) for i in ids], "prompt_len": prompt_len,
        "layers": len(maps), "heads": maps[0].shape[0],
        "weights": [rounded(w) for w in maps],  # (L, H, T, T)
        "allowed": allowed.int().tolist(),  # (T, T)
        "bias": None if bias is None else rounded(bias),  # (H, T, T)
        "stats": {name: [s[name] for s in per_head] for name in ("entropy", "previous", "first")}
                 | {"induction": induction_scores(model, cfg.vocab_size)},
        "induction_tokens": min(INDUCTION_TOKENS, cfg.block_size // 2),
    }


def render_html(view: dict[str, Any]) -> str:
    """The page: the template with its title and the attention map's grey for hidden keys, then the view's JSON
    inlined last, so no token is read as a marker."""
    # Every < as JSON's \u003c: a token "</script>" would end the data script, and "<!--" then "<script>" would put
    # the rest of the page inside a comment.
    data = json.dumps(view, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    template = resources.files("gpt.evaluation").joinpath("viewer.html").read_text(encoding="utf-8")
    title = html.escape(f"{view['attention']} attention")
    return template.replace("__TITLE__", title).replace("__HIDDEN__", HIDDEN).replace("__VIEW_DATA__", data)


@torch.no_grad()
def write_attention_html(path: str | Path, text_model: TextModel, prompt: str, max_new_tokens: int | None = None,
                         temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                         seed: int = 0) -> dict[str, Any]:
    """Continue `prompt` as text_model.complete would (same defaults: a line-based model answers greedily to the
    end of its line), then write the viewer of the prompt's tokens and the new ones (the last block_size of
    them) to `path`; returns the embedded data. The token that stops it (end of line, end of text) is not shown."""
    if not isinstance(text_model, TextModel):  # a GPT or a path was "'GPT' object has no attribute 'greedy'"
        raise ValueError(f"write_attention_html takes a model with its tokenizer, not a {type(text_model).__name__}: "
                         "pass gpt.load(path), or TextModel(model, tokenizer, meta) for a GPT in hand")
    greedy = text_model.greedy(temperature)
    max_new_tokens, temperature, stop = text_model.defaults(max_new_tokens, temperature)
    check_sampling(temperature, top_k, top_p, max_new_tokens, text_model.tokenizer.vocab_size, greedy)
    prompt_ids = text_model.prompt_ids(prompt)
    idx = torch.tensor([prompt_ids], device=text_model.device)
    generator = torch.Generator(device=idx.device).manual_seed(seed)
    ids = generate(text_model.model, idx, max_new_tokens, temperature, top_k, top_p, stop_token=stop,
                   generator=generator, vocab_size=text_model.tokenizer.vocab_size)[0].tolist()
    if stop is not None and len(ids) > len(prompt_ids) and ids[-1] == stop:
        ids.pop()
    shown = ids[-text_model.model.cfg.block_size:]
    view = {**attention_view(text_model.model, text_model.tokenizer, shown,
                             max(0, len(prompt_ids) - (len(ids) - len(shown)))),
            "left_out": len(ids) - len(shown)}  # the tokens before the last block_size, not shown
    Path(path).write_text(render_html(view), encoding="utf-8")
    return view

