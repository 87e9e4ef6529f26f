"""`python -m gpt cost`: what each attention variant costs at long context (prefill and decode tokens/s, the peak
memory of a prefill, the cache's bytes from its tensors beside the variant's formula), at a shape or for a trained
model.pt, with Hugging Face's Llama and Mistral at the same shape beside them (--hf). Rows alternate (A B A B) and
figures are medians over rounds; it prints a table and writes cost.json and cost.png."""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from gpt.inference.depth import Engine, GPTEngine, HFEngine, measure
from gpt.model.attention import ATTENTION
from gpt.model.attention.kernels import KERNELS
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT, check_parts
from gpt.model.positional import POSITIONAL

VARIANTS = ["mha", "gqa", "mqa", "mla", "sliding_window", "linear"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MIB = 2 ** 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attention", nargs="+", default=VARIANTS, metavar="VARIANT",
                        help=f"variants to measure (default: {' '.join(VARIANTS)})")
    parser.add_argument("--kernel", nargs="+", default=["sdpa"], metavar="KERNEL",
                        help="model.kernel of each row: sdpa, math, or both (one row per variant and kernel)")
    parser.add_argument("--ckpt", help="a trained model.pt (or its run folder), measured instead of --attention")
    shape = parser.add_argument_group("the shape measured (random weights)")
    for flag, default in (("--layers", 4), ("--heads", 8), ("--dim", 256), ("--kv-heads", 2), ("--window", 1024),
                          ("--latent", 64), ("--vocab", 256)):
        shape.add_argument(flag, type=int, default=default)
    shape.add_argument("--mlp", default="swiglu")
    shape.add_argument("--pos", default="rope", help="where a variant takes it; torch_mha gets learned positions")
    parser.add_argument("--depths", nargs="+", type=int, default=[0, 1024, 4096, 16384],
                        help="prompt lengths: the cache's depth when decoding starts")
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 8],
                        help="sequences prefilled and decoded together (default: 1 8; batch 8 at 16k takes long)")
    parser.add_argument("--new-tokens", type=int, default=32, help="greedy cached steps timed after each prompt")
    parser.add_argument("--dtype", default="float32", choices=list(DTYPES))
    parser.add_argument("--device", default="cpu", help="where the models run: cpu, or cuda (cuda:N) on a GPU")
    parser.add_argument("--repeats", type=int, default=3, help="alternated rounds over every row; medians reported")
    parser.add_argument("--hf", action="store_true",
                        help="add Hugging Face LlamaForCausalLM (mha, gqa, mqa) and MistralForCausalLM "
                             "(sliding_window) at the same shape, random weights (needs the hf extra)")
    parser.add_argument("--out", default="cost", help="folder for cost.json and cost.png (default: ./cost)")


def check_args(args: argparse.Namespace) -> None:
    """Refuse, in one line naming the flag, what cannot be measured."""
    for flag, values, low in (("--depths", args.depths, 0), ("--batch", args.batch, 1),
                              ("--new-tokens", [args.new_tokens], 1), ("--repeats", [args.repeats], 1)):
        if any(v < low for v in values):
            raise ValueError(f"{flag} {' '.join(map(str, values))}: each must be {low} or more")
    # Rows are keyed by name and tables by batch and depth: a value named twice merged its rounds into repeated rows.
    for flag, values in (("--attention", args.attention), ("--kernel", args.kernel), ("--depths", args.depths),
                         ("--batch", args.batch)):
        twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if twice is not None:
            raise ValueError(f"{flag} {' '.join(map(str, values))}: {twice} is named twice; name each once")
    for flag, values, known in (("--attention", args.attention, ATTENTION), ("--kernel", args.kernel, KERNELS),
                                ("--pos", [args.pos], POSITIONAL)):
        unknown = [v for v in values if v not in known]
        if unknown:
            raise ValueError(f"{flag} {unknown[0]} is unknown; choose from: {', '.join(known)}")
    try:
        device = torch.device(args.device)
    except RuntimeError:
        raise ValueError(f"--device {args.device} is not a device; use cpu, or cuda on a GPU") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {args.device}: the cost command measures on cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: this machine has no CUDA GPU; measure with --device cpu")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"--device {args.device}: this machine has {torch.cuda.device_count()} GPU(s), cuda:0 to "
                         f"cuda:{torch.cuda.device_count() - 1}")


def shape_config(args: argparse.Namespace, attention: str, kernel: str, block_size: int) -> ModelConfig:
    """The measured shape as a ModelConfig; RoPE (or --pos) where the variant takes it, else learned positions."""
    cfg = ModelConfig(vocab_size=args.vocab, layers=args.layers, heads=args.heads, dim=args.dim, block_size=block_size,
                      attention=attention, pos=args.pos, mlp=args.mlp, kv_heads=args.kv_heads, window=args.window,
                      kv_latent_dim=args.latent, kernel=kernel)
    # Only a variant that cannot take --pos falls back to learned positions: a shape --pos itself cannot take (RoPE
    # with an odd head width) would otherwise measure every row with learned positions, and say nothing.
    POSITIONAL[cfg.pos].validate(cfg)
    try:
        check_parts(cfg)
    except ValueError:
        cfg = dataclasses.replace(cfg, pos="learned")
        check_parts(cfg)
    return cfg


def kernels_of(attention: str, kernels: list[str]) -> list[str]:
    """The kernels a variant is measured under: one for those that compute without model.kernel (linear attention,
    torch's own), which would otherwise be two rows of the same computation."""
    return kernels if ATTENTION[attention].has_weights else kernels[:1]


def tinygpt_engines(args: argparse.Namespace, block_size: int) -> list[GPTEngine]:
    """One engine per variant and kernel: random weights at the shape, or the trained --ckpt under each kernel."""
    dtype, engines = DTYPES[args.dtype], []
    if args.ckpt:
        from gpt.inference.checkpoint import load_checkpoint

        trained, _ = load_checkpoint(args.ckpt)
        if max(args.depths) + args.new_tokens > trained.cfg.block_size:
            raise ValueError(f"--depths {max(args.depths)} + --new-tokens {args.new_tokens} exceed the model's "
                             f"block_size={trained.cfg.block_size}: measure at smaller depths")
        configs = [dataclasses.replace(trained.cfg, kernel=k) for k in kernels_of(trained.cfg.attention, args.kernel)]
    else:
        configs = [shape_config(args, a, k, block_size) for a in args.attention for k in kernels_of(a, args.kernel)]
    for cfg in configs:
        torch.manual_seed(0)
        model = GPT(cfg).eval()
        if args.ckpt:
            model.load_state_dict(trained.state_dict())
        name = cfg.attention + (f" ({cfg.kernel})" if len(kernels_of(cfg.attention, args.kernel)) > 1 else "")
        engines.append(GPTEngine(name, model.to(args.device, dtype)))
    return engines


def hf_engines(args: argparse.Namespace, configs: list[ModelConfig]) -> list[HFEngine]:
    """Llama with the key/value heads of each of mha, gqa and mqa, and Mistral with the window, at the shape."""
    try:
        import transformers
    except ImportError:
        raise ValueError("--hf needs transformers: pip install -e '.[hf]' -c constraints.txt") from None
    engines, seen = [], set()
    for cfg in configs:
        kv_heads = {"mha": cfg.heads, "gqa": cfg.kv_heads, "mqa": 1, "sliding_window": cfg.heads}.get(cfg.attention)
        if kv_heads is None or (cfg.attention, kv_heads) in seen:
            continue
        seen.add((cfg.attention, kv_heads))
        common = dict(vocab_size=cfg.vocab_size, hidden_size=cfg.dim, num_hidden_layers=cfg.layers,
                      num_attention_heads=cfg.heads, num_key_value_heads=kv_heads, head_dim=cfg.head_dim,
                      intermediate_size=max(1, 2 * int(cfg.mlp_ratio * cfg.dim) // 3), hidden_act="silu",
                      max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.norm_eps, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
        if cfg.attention == "sliding_window":
            config = transformers.MistralConfig(**common, sliding_window=cfg.window)
            name = f"hf mistral (window {cfg.window})"
        else:
            config, name = transformers.LlamaConfig(**common), f"hf llama ({kv_heads} kv head{'s' * (kv_heads > 1)})"
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
        engines.append(HFEngine(name, model.to(args.device, DTYPES[args.dtype]).eval()))
    return engines


def cpu_line() -> str:
    """The CPU model and the flags that decide bf16 speed (AVX512-BF16, AMX), from /proc/cpuinfo where there is one."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    flags = set(fields.get("flags\t\t", "").split())
    wanted = [f for f in ("avx512f", "avx512_bf16", "amx_tile", "amx_bf16") if f in flags] or ["none of avx512f, "
                                                                                              "avx512_bf16, amx"]
    model = fields.get("model name\t", "unknown CPU").strip()
    return f"{model}; flags {' '.join(wanted)}; torch CPU capability {torch.backends.cpu.get_cpu_capability()}"


def device_line(device: torch.device) -> str:
    """The machine the figures belong to: the GPU's name, or the CPU's model and flags."""
    if device.type == "cuda":
        return f"gpu: {torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    return f"cpu: {cpu_line()}"


def run_rounds(engines: list[Engine], args: argparse.Namespace, vocab_size: int) -> list[dict[str, Any]]:
    """Every engine at every batch and depth, rounds alternating over the engines; one result row per combination."""
    rows, total, done, start = [], len(args.batch) * len(args.depths) * args.repeats * len(engines), 0, time.time()
    device = torch.device(args.device)
    for batch in args.batch:
        for depth in args.depths:
            runs: dict[str, list] = {e.name: [] for e in engines}
            for _ in range(args.repeats):
                for engine in engines:
                    runs[engine.name].append(measure(engine, batch, depth, args.new_tokens, vocab_size, device))
                    done += 1
                    last = runs[engine.name][-1]
                    print(f"[{done}/{total} {time.time() - start:,.0f} s] batch {batch} depth {depth:,} {engine.name}: "
                          f"prefill {last.prefill_s:.2f} s, decode {1000 * last.decode_s / args.new_tokens:.2f} "
                          "ms/token", flush=True)
            # Speeds relative to the first row and to the first Hugging Face row, paired within each round.
            references = {name: runs[name] for name in (engines[0].name, next(
                (e.name for e in engines if isinstance(e, HFEngine)), engines[0].name))}
            for engine in engines:
                rows.append(summarise(engine, runs[engine.name], references, batch, depth, args.new_tokens))
    return rows


def summarise(engine: Engine, runs: list, references: dict[str, list], batch: int, depth: int,
              new_tokens: int) -> dict[str, Any]:
    prefill, decode = statistics.median(r.prefill_s for r in runs), statistics.median(r.decode_s for r in runs)

    def ratios(key: str) -> dict[str, float]:  # median over rounds of the reference's time over this one's
        return {name: statistics.median(getattr(a, key) / getattr(b, key) for a, b in zip(ref, runs))
                for name, ref in references.items()}

    return {"name": engine.name, "batch": batch, "depth": depth,
            "prefill_x": ratios("prefill_s") if depth else {}, "decode_x": ratios("decode_s"),
            "prefill_tokens_per_s": batch * depth / prefill if depth else None,
            "decode_tokens_per_s": batch * new_tokens / decode, "decode_ms_per_token": 1000 * decode / new_tokens,
            "prefill_peak_mib": statistics.median(r.peak_bytes for r in runs) / MIB,
            "cache_bytes": runs[0].cache_bytes, "cache_mib": runs[0].cache_bytes / MIB,
            "formula_bytes": (formula := engine.formula_bytes(batch, max(depth, 1) + new_tokens)),
            "formula_mib": None if formula is None else formula / MIB,
            "rounds": [dataclasses.asdict(r) for r in runs]}


def table(rows: list[dict[str, Any]]) -> str:
    """One markdown table per batch and depth, one line per engine."""
    lines = []
    for (batch, depth) in dict.fromkeys((r["batch"], r["depth"]) for r in rows):
        group = [r for r in rows if (r["batch"], r["depth"]) == (batch, depth)]
        refs = list(group[0]["decode_x"])
        x = " | ".join(f"x {ref}" for ref in refs)
        lines += ["", f"| batch {batch}, depth {depth:,} | prefill tok/s | {x} | decode tok/s | {x} | decode ms/token "
                      "| prefill peak MiB | cache MiB (tensors) | cache MiB (formula) |",
                  "|---|" + "---:|" * (6 + 2 * len(refs))]
        for r in group:
            cells = [r["prefill_tokens_per_s"], *(r["prefill_x"].get(ref) for ref in refs), r["decode_tokens_per_s"],
                     *(r["decode_x"][ref] for ref in refs), r["decode_ms_per_token"], r["prefill_peak_mib"],
                     r["cache_mib"], r["formula_mib"]]
            formats = ["{:,.0f}", *["{:.2f}"] * len(refs), "{:,.1f}", *["{:.2f}"] * len(refs), "{:.2f}", "{:,.0f}",
                       "{:,.2f}", "{:,.2f}"]
            lines.append(f"| {r['name']} | " + " | ".join("—" if c is None else f.format(c)
                                                         for c, f in zip(cells, formats)) + " |")
    return "\n".join(lines)


def figure(rows: list[dict[str, Any]], machine: str) -> Any:
    """Decode ms/token, cache MiB and prefill tokens/s against depth, one line per engine, one row per batch, under
    the machine they were measured on (a GPU's figures and a CPU's read differently)."""
    from matplotlib.figure import Figure  # matplotlib only when a figure is drawn

    batches = list(dict.fromkeys(r["batch"] for r in rows))
    depths = sorted({r["depth"] for r in rows})
    fig = Figure(figsize=(15, 4 * len(batches)), layout="constrained")
    axes = fig.subplots(len(batches), 3, squeeze=False)
    panels = (("decode_ms_per_token", "decode ms/token"), ("cache_mib", "cache MiB"),
              ("prefill_tokens_per_s", "prefill tokens/s"))
    for axes_row, batch in zip(axes, batches):
        for ax, (key, label) in zip(axes_row, panels):
            for name in dict.fromkeys(r["name"] for r in rows):
                points = [(r["depth"], r[key]) for r in rows if r["name"] == name and r["batch"] == batch
                          and r[key] is not None]
                ax.plot(*zip(*points), marker="o", linestyle="--" if name.startswith("hf ") else "-", label=name)
            ax.set(xlabel="depth (tokens in the cache)", ylabel=label, title=f"{label}, batch {batch}")
            ax.set_xscale("symlog", linthresh=min([d for d in depths if d] or [1]))
            ax.set_xticks(depths, [f"{d:,}" for d in depths])
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize="small")
    fig.suptitle(machine, fontsize="small")
    return fig


def run(args: argparse.Namespace) -> None:
    """Measure each attention variant's prefill, decode, peak memory and cache bytes at depth, beside Hugging Face."""
    check_args(args)
    out = Path(args.out)
    try:  # before any measuring: a run of minutes must not end in a traceback for want of a folder
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out {args.out}: cannot make that folder ({err.strerror}: {err.filename}): pass --out a "
                         "folder, new or existing") from None
    block_size = max(args.depths) + args.new_tokens
    engines = tinygpt_engines(args, block_size)
    if args.hf:
        engines += hf_engines(args, [e.model.cfg for e in engines])
    cfg = engines[0].model.cfg
    if sys.argv[1:2] == ["cost"]:  # run by the front door, not called from Python
        print(f"command: python -m gpt cost {shlex.join(sys.argv[2:])}")
    machine = device_line(torch.device(args.device))
    print(machine)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s), {args.dtype}; {cfg.layers} layers x "
          f"{cfg.heads} heads x {cfg.dim} dims, mlp={cfg.mlp}, vocab {cfg.vocab_size}; {args.new_tokens} greedy "
          f"cached steps after each prompt; {args.repeats} alternated rounds, medians")
    rows = run_rounds(engines, args, engines[0].model.cfg.vocab_size)
    print(table(rows))
    result = {"settings": vars(args), "cpu": cpu_line(), "device": machine, "torch": torch.__version__,
              "threads": torch.get_num_threads(),
              "dtype": args.dtype, "new_tokens": args.new_tokens, "rows": rows,
              "configs": {e.name: e.model.cfg.to_dict() for e in engines if isinstance(e, GPTEngine)}}
    (out / "cost.json").write_text(json.dumps(result, indent=2) + "\n")
    figure(rows, machine).savefig(out / "cost.png")
    print(f"\nwrote {out / 'cost.json'} and {out / 'cost.png'}")
