"""`python -m gpt cost`: what each attention variant costs at long context (prefill and decode tokens/s, the peak
memory of a prefill, the cache's bytes from its tensors beside the variant's formula), at a shape or for a trained
model.pt, with Hugging Face's implementation of the same models beside them (--hf). Rows alternate (A B A B) and
figures are medians over rounds; it prints a table and writes cost.json and cost.png."""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex
import sys
from pathlib import Path

import torch

from gpt.cost.counterparts import computed_by, hf_engines
from gpt.cost.rounds import run_rounds
from gpt.cost.tables import device_line, figure, table
from gpt.inference.depth import Engine, GPTEngine
from gpt.machine import cpu_description
from gpt.model.attention import ATTENTION
from gpt.model.attention.kernels import KERNELS
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT, check_parts, without_foreign_settings
from gpt.model.positional import POSITIONAL
from gpt.validate import repeated

VARIANTS = ["mha", "gqa", "mqa", "mla", "sliding_window", "linear"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


# The shape measured with random weights, where no --ckpt is given; with --ckpt the checkpoint's own is measured.
SHAPE = {"attention": VARIANTS, "layers": 4, "heads": 8, "dim": 256, "kv_heads": 2, "window": 1024, "latent": 64,
         "vocab": 256, "mlp": "swiglu", "pos": "rope"}
# The ModelConfig field each flag sets: the shape is built through it, and the model's refusals, which name fields as
# train.py sets them, are spoken back through it in this command's flags.
FIELDS = {"vocab_size": "vocab", "layers": "layers", "heads": "heads", "dim": "dim", "kv_heads": "kv_heads",
          "window": "window", "kv_latent_dim": "latent", "mlp": "mlp", "pos": "pos", "attention": "attention",
          "kernel": "kernel"}
# A field as a refusal names it: model.<field> (the setting to change) or <field>=<value> (what was given); a field
# inside a formula (dim/heads=5) or a word of the prose ("every head's keys") is left as it is.
_FIELD = "(" + "|".join(FIELDS) + ")"
QUOTE = "'"  # around a string value in a field's refusal (mlp='foo'), not in a flag's
NAMED = re.compile(rf"(?<![\w./])(?:model\.{_FIELD}\b|{_FIELD}=('[^']*'|[^\s,:;)]+))")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The shape's flags default to None, filled by settle_shape: given beside --ckpt, they are refused, not ignored.
    parser.add_argument("--attention", nargs="+", metavar="VARIANT",
                        help=f"variants to measure (default: {' '.join(VARIANTS)})")
    parser.add_argument("--kernel", nargs="+", default=["sdpa"], metavar="KERNEL",
                        help="model.kernel of each row: sdpa, math, or both (one row per variant and kernel)")
    parser.add_argument("--ckpt", help="a trained model.pt (or its run folder), measured instead of --attention")
    shape = parser.add_argument_group("the shape measured (random weights)")
    for name in ("layers", "heads", "dim", "kv_heads", "window", "latent", "vocab"):
        shape.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default: {SHAPE[name]}")
    shape.add_argument("--mlp", help=f"default: {SHAPE['mlp']}")
    shape.add_argument("--pos", help=f"default: {SHAPE['pos']}; where a variant takes it (torch_mha gets learned "
                       "positions)")
    parser.add_argument("--depths", nargs="+", type=int, default=[0, 1024, 4096, 16384],
                        help="prompt lengths: the cache's depth when decoding starts")
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 8],
                        help="sequences prefilled and decoded together (default: 1 8; batch 8 at 16k takes long)")
    parser.add_argument("--new-tokens", type=int, default=32, help="greedy cached steps timed after each prompt")
    parser.add_argument("--dtype", default="float32", choices=list(DTYPES))
    parser.add_argument("--device", default="cpu", help="where the models run: cpu, or cuda (cuda:N) on a GPU")
    parser.add_argument("--repeats", type=int, default=3, help="alternated rounds over every row; medians reported")
    parser.add_argument("--hf", action="store_true",
                        help="add Hugging Face's model of each variant it has, from the same parts and shape "
                             f"({computed_by()}), random weights (needs the hf extra)")
    parser.add_argument("--out", default="cost", help="folder for cost.json and cost.png (default: ./cost)")


def settle_shape(args: argparse.Namespace) -> None:
    """The shape's defaults where no --ckpt is given; beside --ckpt a shape flag is refused: the checkpoint's own
    model is measured, and the flag was ignored while cost.json recorded it. So is a variant's own setting that no
    variant measured reads (check_own_settings)."""
    given = [name for name in SHAPE if getattr(args, name) is not None]
    if args.ckpt and given:
        flag = f"--{given[0].replace('_', '-')}"
        raise ValueError(f"{flag} with --ckpt: the checkpoint's own model is measured, at its shape; drop {flag}, or "
                         "drop --ckpt to measure that shape with random weights")
    check_own_settings(args)
    if not args.ckpt:
        for name, default in SHAPE.items():
            setattr(args, name, default if getattr(args, name) is None else getattr(args, name))


def check_own_settings(args: argparse.Namespace) -> None:
    """Refuse a variant's own setting (--kv-heads, --window, --latent), or a --kernel, given where no variant measured
    reads it: every row was built without it, and cost.json recorded it as measured."""
    measured = args.attention or VARIANTS
    if not set(measured) <= set(ATTENTION):  # check_args names the unknown variant
        return
    for field, name in FIELDS.items():
        readers = [attention for attention, part in ATTENTION.items() if field in part.own_settings]
        if readers and getattr(args, name) is not None and not set(readers) & set(measured):
            flag = f"--{name.replace('_', '-')}"
            raise ValueError(f"{flag} {getattr(args, name)} changes nothing under --attention {' '.join(measured)}, "
                             f"which does not read it: drop {flag}, or add {' or '.join(readers)} to --attention")
    check_kernel_read(args.kernel, measured, f"under --attention {' '.join(measured)}",
                      "drop --kernel, or add a variant that does (mha) to --attention")


def check_kernel_read(kernels: list[str], measured: list[str], where: str, fix: str) -> None:
    """Refuse a --kernel given where no variant measured forms softmax weights for it to compute (linear attention,
    torch's own): its rows were computed without it. --kernel's default reads as not given."""
    given = kernels != ["sdpa"] and set(kernels) <= set(KERNELS)  # check_args names an unknown kernel
    if given and not any(ATTENTION[attention].has_weights for attention in measured):
        raise ValueError(f"--kernel {' '.join(kernels)} changes nothing {where}, which forms no softmax weights: {fix}")


def check_args(args: argparse.Namespace) -> None:
    """Refuse, in one line naming the flag, what cannot be measured (after settle_shape)."""
    for flag, values, low in (("--depths", args.depths, 0), ("--batch", args.batch, 1),
                              ("--new-tokens", [args.new_tokens], 1), ("--repeats", [args.repeats], 1)):
        if any(v < low for v in values):
            raise ValueError(f"{flag} {' '.join(map(str, values))}: each must be {low} or more")
    # Rows are keyed by name and tables by batch and depth: a value named twice merged its rounds into repeated rows.
    for flag, values in (("--attention", args.attention or []), ("--kernel", args.kernel), ("--depths", args.depths),
                         ("--batch", args.batch)):
        if (twice := repeated(values)) is not None:
            raise ValueError(f"{flag} {' '.join(map(str, values))}: {twice} is named twice; name each once")
    for flag, values, known in (("--attention", args.attention or [], ATTENTION), ("--kernel", args.kernel, KERNELS),
                                ("--pos", [args.pos] if args.pos else [], POSITIONAL)):
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


def longest(args: argparse.Namespace) -> int:
    """The longest sequence measured: a prompt at depth 0 is still one token (measure feeds at least one)."""
    return max(*args.depths, 1) + args.new_tokens


def in_flags(message: str, attention: str) -> str:
    """A refusal of the model's, which names train.py's settings, in this command's flags: `kv_latent_dim=64` is
    `--latent 64`, `set model.window` is `set --window`, and its advice to use another variant is to drop this one
    from --attention, which measures several."""
    message = re.sub(r"\buse attention=\S+", f"drop {attention} from --attention", message)

    def flag(named: re.Match[str]) -> str:
        setting, given, value = named.groups()
        name = "--" + FIELDS[setting or given].replace("_", "-")
        return name if setting else f"{name} {value.strip(QUOTE)}"

    return NAMED.sub(flag, message)


def shape_config(args: argparse.Namespace, attention: str, kernel: str, block_size: int) -> ModelConfig:
    """The measured shape as a ModelConfig; RoPE (or --pos) where the variant takes it, else learned positions. A
    shape the model refuses is a ValueError in this command's flags."""
    try:
        return checked_config(args, attention, kernel, block_size)
    except ValueError as err:
        raise ValueError(in_flags(str(err), attention)) from None


def checked_config(args: argparse.Namespace, attention: str, kernel: str, block_size: int) -> ModelConfig:
    """shape_config's config, its refusals naming train.py's settings."""
    given = {"attention": attention, "kernel": kernel}
    # A variant's own settings (--kv-heads, --window, --latent) reach its rows alone: the others are built without them.
    cfg = without_foreign_settings(ModelConfig(block_size=block_size, **{
        field: given.get(field, getattr(args, FIELDS[field])) for field in FIELDS}))
    # Only a variant that cannot take --pos falls back to learned positions: a shape --pos itself cannot take (RoPE
    # with an odd head width) would otherwise measure every row with learned positions, and say nothing.
    POSITIONAL[cfg.pos].validate(cfg, ATTENTION[cfg.attention].rotated(cfg))
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

        trained, _ = load_checkpoint(args.ckpt, purpose="to measure its cost")
        if longest(args) > trained.cfg.block_size:
            # At depth 0 the prompt is still one token: "0 + 16 exceed block_size=16" read wrong and its fix could not
            # be taken.
            raise ValueError(f"--depths {max(args.depths)} + --new-tokens {args.new_tokens} need {longest(args)} "
                             f"positions (a prompt is at least one token), which exceed the model's "
                             f"block_size={trained.cfg.block_size}: measure at smaller depths or fewer new tokens")
        attention = trained.cfg.attention
        check_kernel_read(args.kernel, [attention], f"for --ckpt's attention={attention}", "drop --kernel")
        configs = [dataclasses.replace(trained.cfg, kernel=k) for k in kernels_of(attention, args.kernel)]
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


def positions(engines: list[Engine]) -> str:
    """The positional encoding of most of tinygpt's rows, then the rows measured with another: a variant that cannot
    take --pos gets learned positions (--attention linear --pos alibi measured learned ones, unsaid)."""
    rows: dict[str, list[str]] = {}
    for engine in engines:
        if isinstance(engine, GPTEngine):
            rows.setdefault(engine.model.cfg.pos, []).append(engine.name)
    most = max(rows, key=lambda pos: len(rows[pos]))
    return f"pos={most}" + "".join(f" ({pos}: {', '.join(names)})" for pos, names in rows.items() if pos != most)


def kernels(engines: list[Engine]) -> str:
    """The kernels that computed tinygpt's rows that form softmax weights, for the settings line: a --ckpt trained with
    model.kernel=math is measured under --kernel (sdpa unless given), and nothing printed said which."""
    used = dict.fromkeys(engine.model.cfg.kernel for engine in engines
                         if isinstance(engine, GPTEngine) and ATTENTION[engine.model.cfg.attention].has_weights)
    return f"kernel={' and '.join(used)}, " if used else ""


def run(args: argparse.Namespace) -> None:
    """Measure each attention variant's prefill, decode, peak memory and cache bytes at depth, beside Hugging Face."""
    settle_shape(args)
    check_args(args)
    out = Path(args.out)
    try:  # before any measuring: a run of minutes must not end in a traceback for want of a folder
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out {args.out}: cannot make that folder ({err.strerror}: {err.filename}): pass --out a "
                         "folder, new or existing") from None
    block_size = longest(args)
    engines = tinygpt_engines(args, block_size)
    if args.hf:
        engines += hf_engines([e.model for e in engines], args.device, DTYPES[args.dtype], trained=bool(args.ckpt))
    cfg = engines[0].model.cfg
    if sys.argv[1:2] == ["cost"]:  # run by the front door, not called from Python
        print(f"command: python -m gpt cost {shlex.join(sys.argv[2:])}")
    machine = device_line(torch.device(args.device))
    print(machine)
    settings = (f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s), {args.dtype}; {cfg.layers} "
                f"layers x {cfg.heads} heads x {cfg.dim} dims, mlp={cfg.mlp}, {positions(engines)}, "
                f"{kernels(engines)}vocab {cfg.vocab_size}; {args.new_tokens} greedy cached steps after each prompt; "
                f"{args.repeats} alternated rounds, medians")
    print(settings)
    rows = run_rounds(engines, args, engines[0].model.cfg.vocab_size)
    print(table(rows))
    result = {"settings": vars(args), "cpu": cpu_description(), "device": machine, "torch": torch.__version__,
              "threads": torch.get_num_threads(),
              "dtype": args.dtype, "new_tokens": args.new_tokens, "rows": rows,
              "configs": {e.name: e.model.cfg.to_dict() for e in engines if isinstance(e, GPTEngine)}}
    (out / "cost.json").write_text(json.dumps(result, indent=2) + "\n")
    # The plot is read without the table: a bf16 run's and an fp32 one's, or two shapes', would look alike.
    figure(rows, f"{machine}\n{settings}").savefig(out / "cost.png")
    print(f"\nwrote {out / 'cost.json'} and {out / 'cost.png'}")
