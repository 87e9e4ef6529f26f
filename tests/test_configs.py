"""Every option of every config group composes into a valid run configuration."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf, open_dict

from gpt.data.tokenizers.vocab import CharTokenizer
from gpt.inference.checkpoint import save_model
from gpt.model.attention import ATTENTION
from gpt.model.config import ModelConfig
from gpt.model.gpt import GPT
from gpt.model.positional import POSITIONAL
from gpt.training.checks import RunSettings, check_config
from gpt.training.optim import OptimConfig
from gpt.training.recorded import as_typed
from tests.conftest import ROOT

CONFIGS = ROOT / "configs"
# configs/hydra/ holds options of Hydra's own groups (launchers: tests/test_launchers.py), not of train.py's.
GROUPS = sorted(p.name for p in CONFIGS.iterdir() if p.is_dir() and p.name != "hydra")


def compose_with(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


@pytest.mark.parametrize("group, option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes(group: str, option: str, tmp_path: Path) -> None:
    # trainer=fsdp shards the matrices that the default optim=muon orthogonalises whole: it takes optim=adamw
    cfg = compose_with(f"{group}={option}", *(["optim=adamw"] if f"{group}={option}" == "trainer=fsdp" else []))
    if cfg.init_from:  # a preset naming a folder to fine-tune from: any model.pt stands in for it
        save_model(tmp_path / "model.pt", GPT(ModelConfig(vocab_size=5, layers=1, heads=1, dim=8)), CharTokenizer([]))
        cfg.init_from = str(tmp_path / "model.pt")
    check_config(cfg)  # every shipped value passes the type and range checks train.py makes before any work
    model = ModelConfig.from_dict({**OmegaConf.to_container(cfg.model), "vocab_size": 50})
    if group == "attention":
        assert model.attention == option
    if group == "pos":
        assert model.pos == option


@pytest.mark.parametrize("registry, group", [(ATTENTION, "attention"), (POSITIONAL, "pos")])
def test_registry_names_and_yaml_files_match(registry: dict, group: str) -> None:
    assert set(registry) == set(options(group))


def test_model_keys_are_model_config_fields() -> None:
    cfg = compose_with("model.heads=8", "model.layers=2")
    model = ModelConfig.from_dict({**OmegaConf.to_container(cfg.model), "vocab_size": 50})
    assert (model.heads, model.layers) == (8, 2)


def test_defaults_list_names_every_group() -> None:
    defaults = OmegaConf.load(CONFIGS / "train.yaml").defaults
    named = {next(iter(d)) for d in defaults if isinstance(d, (dict, DictConfig))}
    assert set(GROUPS) <= named | {"experiment"}
    assert Path(CONFIGS / "train.yaml").read_text().startswith("#")


def test_shakespeare_char_cpu_is_nanogpts_model_and_optimizer() -> None:
    cfg = compose_with("experiment=shakespeare_char_cpu")
    model = ModelConfig.from_dict({**OmegaConf.to_container(cfg.model), "vocab_size": 65})
    parts = (model.norm, model.bias, model.mlp, model.pos, model.attention)
    assert parts == ("layernorm", False, "gelu_exact", "learned", "mha_fused")
    assert (model.layers, model.heads, model.dim, model.block_size, cfg.data.batch_size) == (4, 4, 128, 64, 12)
    optim = cfg.optim
    assert (optim.name, optim.schedule, list(optim.betas), optim.lr, optim.min_lr, optim.warmup_steps) == \
        ("adamw", "cosine", [0.9, 0.99], 1e-3, 1e-4, 100)


def test_the_dataclass_defaults_are_what_python_train_py_trains() -> None:
    """One set of defaults: a notebook's ModelConfig(vocab_size=...) and OptimConfig() are the README's run."""
    cfg = compose_with()
    vocab_size = 37  # the calculator's words and the newline
    assert ModelConfig.from_dict({**OmegaConf.to_container(cfg.model, resolve=True), "vocab_size": vocab_size}) \
        == ModelConfig(vocab_size=vocab_size)
    assert OptimConfig.from_dict(OmegaConf.to_container(cfg.optim, resolve=True)) == OptimConfig()


def test_run_settings_are_train_yamls_own_keys() -> None:
    """train.py's top-level keys are typed in one place (RunSettings), checked before any work."""
    own = [k for k, v in OmegaConf.load(CONFIGS / "train.yaml").items() if k not in ("defaults", "hydra")]
    assert own == [field.name for field in dataclasses.fields(RunSettings)]


def test_a_value_whose_interpolation_names_no_setting_is_refused_naming_where_it_is_written() -> None:
    # The checks skip interpolated values, and building the data met it later with no key named.
    with pytest.raises(ValueError, match=r"^data\.path: Interpolation key 'y' not found"):
        check_config(compose_with("data=text", "data.path=/tmp/x${y}.txt"))
    with pytest.raises(ValueError, match=r"^data\.path\.1: Interpolation key 'nope' not found"):
        check_config(compose_with("data=text", "data.path=[a.txt,${nope}]"))


def test_a_setting_removed_with_tilde_that_another_names_says_to_drop_the_tilde() -> None:
    # optim.max_steps is ${trainer.max_steps}: it said "optim.max_steps: Interpolation key 'trainer.max_steps' not
    # found", naming neither the ~ nor its fix
    with pytest.raises(ValueError, match=r"^trainer\.max_steps is missing from the config: train\.py needs it "
                                         r"\(drop ~trainer\.max_steps\)$"):
        check_config(compose_with("~trainer.max_steps"), ["~trainer.max_steps"])
    with pytest.raises(ValueError, match=r"^trainer is missing from the config: train\.py needs it \(drop ~trainer\)$"):
        check_config(compose_with("~trainer"), ["~trainer"])


def test_a_setting_an_option_s_file_leaves_out_names_that_file_not_a_tilde() -> None:
    # A configs/optim/<name>.yaml without max_steps said "drop ~optim.max_steps" to a command that typed no ~.
    cfg = compose_with()
    with open_dict(cfg.optim):
        del cfg.optim.max_steps
    with pytest.raises(ValueError, match=r"^optim\.max_steps is missing from the config: add it to the optim option's "
                                         r"file \(configs/optim/<option>\.yaml\)$"):
        check_config(cfg, [])
    cfg = compose_with()
    with open_dict(cfg):
        cfg.hydra = {"runtime": {"choices": {"optim": "muon"}}}
        del cfg.optim.max_steps
    with pytest.raises(ValueError, match=r"^optim\.max_steps is missing from the config: add it to the optim option's "
                                         r"file \(configs/optim/muon\.yaml\)$"):
        check_config(cfg, [])


def test_the_command_lines_overrides_are_read_as_typed_not_resolved() -> None:
    # Each is a string Hydra parses again: resolved on reading, an escaped \${ came back as an interpolation.
    task = OmegaConf.create({"task": [r"data.path=/tmp/x\${y}.txt", "data.path=/tmp/${nope}"]}).task
    assert as_typed(task) == [r"data.path=/tmp/x\${y}.txt", "data.path=/tmp/${nope}"]
    assert as_typed(["model.dim=64"]) == ["model.dim=64"]
