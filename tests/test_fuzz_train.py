"""train.py's command line, fuzzed: any keys of the composed config with any values either start a run or are one
line and exit 2, leaving no run folder. In this process, through the code train.py runs (preflight, then the job
main() runs for a sample of the command lines that pass it); tests/test_first_hour.py's real processes prove the
wiring."""
from __future__ import annotations

import urllib.error
from collections.abc import Iterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import gpt.data.download as download
from gpt.training.checks import check_config
from gpt.training.preflight import preflight
from tests.fuzzing import (CONFIGS, Outcome, assert_clean, call, clean_folder, command_lines, config_keys, fresh_folder,
                           group_options, job, near, scaled, yaml)

def checked(argv: list[str]) -> Outcome:
    """train.py's command line up to Hydra: preflight, as `python train.py <argv>` runs it."""
    return call("train.py", lambda: preflight(argv, CONFIGS, check_config))


@given(argv=command_lines())
@example(argv=["model.block_size=1,2"])  # a sweep without -m: Hydra's five-line "Ambiguous value", exit 1
@example(argv=["attention=mha,gqa"])
@example(argv=["~data"])  # a section removed: an attribute error from deep in the checks
@example(argv=["~trainer.accelerator"])
@example(argv=["model.heads=${nope}"])  # an interpolation to nowhere
@example(argv=["data._target_=nope.Nope"])  # an import error, and Hydra's own log lines
@example(argv=["data.tasks.calculator=1"])  # a task's knobs that are not a mapping: TypeError in build_tasks
@example(argv=["data.tasks.calculator={1:2,a:3}"])  # knob names of two types could not be sorted
@example(argv=["callbacks.sample=7"])  # a section replaced by a value: "Input cfg is not an OmegaConf config"
@example(argv=["data.tasks.calculator=[a]"])  # "is not a setting of data.tasks; did you mean data.tasks.calculator?"
@example(argv=["optim.lr=inf"])  # a non-finite rate passed the range check, then diverged at step 1
@settings(max_examples=scaled(100))
def test_any_command_line_is_checked_in_one_line_before_a_run_folder_exists(argv: list[str]) -> None:
    with fresh_folder() as folder:
        outcome = checked(argv)
        assert_clean(outcome, argv)
        assert outcome.code != 0 or outcome.err == "", f"{argv} passed with stderr {outcome.err!r}"
        assert clean_folder(folder) == [], argv


# Settings whose well-typed values a test cannot afford in this process: several processes (DDP), a compiler run,
# a service process (wandb). The checks above still fuzz them; tests/test_ddp.py and test_loggers.py run them.
NOT_IN_PROCESS = ("trainer.devices", "trainer.num_nodes", "trainer.strategy", "trainer.accelerator", "compile",
                  "trainer=ddp", "trainer=fsdp", "trainer=gpu", "logger=wandb", "experiment=")
def typed_overrides() -> st.SearchStrategy[list[str]]:
    """Overrides a user means: well-typed values near each key's default, and the options of each group."""
    keys = {k: v for k, v in config_keys().items() if not k.startswith(NOT_IN_PROCESS) and not k.endswith("_target_")
            and not isinstance(v, dict)}
    groups = [f"{group}={option}" for group, options in group_options().items() for option in options]
    one = st.sampled_from(sorted(keys)).flatmap(lambda k: near(keys[k]).map(lambda v: f"{k}={yaml(v)}")) | \
        st.sampled_from(sorted(g for g in groups if not g.startswith(NOT_IN_PROCESS)))
    return st.lists(one, min_size=1, max_size=4)


@pytest.fixture(scope="module", autouse=True)
def offline() -> Iterator[None]:
    """Nothing downloads in tests: a preset that names a URL meets a network that is not there."""
    def unreachable(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no network in tests")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(download.urllib.request, "urlopen", unreachable)
        patch.setenv("WANDB_MODE", "disabled")
        yield


@given(argv=typed_overrides())
@example(argv=["seed=4294967296"])  # past numpy's seeds: refused only once the run had begun, not naming seed
@example(argv=["callbacks.sample.temperature=1e-300"])  # every logit / a tiny temperature was inf: nan, a crash
@settings(max_examples=scaled(6))
def test_a_command_line_that_passes_the_checks_trains_a_step_or_is_one_line(argv: list[str]) -> None:
    tiny = ["model.layers=1", "model.dim=16", "model.heads=2", "data.batch_size=8", "trainer=debug"]
    argv = [*tiny, *argv]
    with fresh_folder() as folder:
        if checked(argv).code != 0:
            return
        run_dir = folder / "outputs" / "run"
        outcome = job(argv, run_dir)
        assert_clean(outcome, argv)
        assert outcome.err.count("error: ") == (outcome.code == 2), argv
        if outcome.code == 0:
            assert (run_dir / "model.pt").is_file(), argv
        else:
            assert not run_dir.exists(), f"{argv} left {clean_folder(run_dir)}"
