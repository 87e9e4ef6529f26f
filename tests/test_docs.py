"""README.md and docs/*.md work as written: every ```python block runs (on a trained model where it loads one, and
the Quick start's promised answer is the true, held-out one), every command line parses or composes and passes the
checks train.py makes before any work, every config key is named in docs/configuration.md, and every relative link
points at a file (and heading) that exists."""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

import generate
from gpt.__main__ import main as front_door
from gpt.__main__ import VERBS, parser_for
from gpt.data.tasks.calculator import all_problems
from gpt.model.attention import ATTENTION
from gpt.model.positional import POSITIONAL
from gpt.sweeps.report_figures import FIGURES
from gpt.training.checks import check_config
from gpt.training.optim import SCHEDULES
from gpt.training.composition import compose_train, group_options
from gpt.training.config_errors import explain
from gpt.training.preflight import first_of_each_sweep
from gpt.training.run_folder import REPORT
from tests.conftest import ROOT
from train import CONFIGS

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
# Values the reader supplies (<date>, <GPT-2 folder>, $NODE_RANK): commands are composed with a stand-in for them,
# and value-checked without them.
PLACEHOLDER = re.compile(r"<[^<>\n`]+>|\$\w+")
STAND_IN = "READER_SUPPLIES"
# Inline `spans` that are commands a reader may copy: checked like the lines of ```bash blocks.
INLINE_COMMAND = re.compile(r"`((?:OMP_NUM_THREADS=\S+\s)?(?:/usr/bin/time\s)?(?:python|pip|torchrun|bash)\s[^`]+)`")
OUTSIDE = {"tensorboard", "wandb"}  # other programs' commands, named for the reader, not ours to check
TRAIN_FLAGS = {"-m", "--multirun", "--help", "-h"}
RUN_FOLDER = re.compile(r"outputs/[^/\"']+/[^/\"']+")  # outputs/<date>/<time>, or a dated example of one
PROMISE = re.compile(r'complete\("([^"]+)"\)\)\s*# (.+)')  # print(model.complete("...")) # the answer


def relative(page: Path) -> str:
    return str(page.relative_to(ROOT))


def fenced(kind: str) -> list[tuple[str, int, str]]:
    """(page, line, text) of every ```<kind> block."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) == kind:
                found.append((relative(page), text[:match.start()].count("\n") + 1, match.group(2)))
    return found


def command_lines() -> list[tuple[str, str, bool]]:
    """(where, line, inline) of every line of every ```bash block (continuations joined) and every command in
    the prose, whose span may wrap onto the next line."""
    found = []
    for page, line, text in fenced("bash"):
        for offset, command in enumerate(text.replace("\\\n", " ").splitlines()):
            if command.strip() and not command.lstrip().startswith("#"):
                found.append((f"{page}:{line + 1 + offset}", command, False))
    for page in PAGES:
        prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
        for match in INLINE_COMMAND.finditer(prose):
            number = prose.count("\n", 0, match.start()) + 1
            found.append((f"{relative(page)}:{number}", " ".join(match.group(1).split()), True))
    return found


def commands(line: str) -> Iterator[list[str]]:
    """Each command of a line (split at &&) as argv, placeholders replaced by the stand-in, comments dropped."""
    argv = shlex.split(PLACEHOLDER.sub(STAND_IN, line), comments=True)
    while argv:
        cut = argv.index("&&") if "&&" in argv else len(argv)
        yield argv[:cut]
        argv = argv[cut + 1:]


@contextlib.contextmanager
def refused_in_one_line(command: str) -> Iterator[None]:
    """A parser's exit or a check's ValueError becomes a test failure naming the command."""
    try:
        yield
    except SystemExit as exit_:
        if exit_.code:
            pytest.fail(f"{command}: exits {exit_.code}")
    except (ValueError, HydraException) as err:
        pytest.fail(f"{command}: {str(err).splitlines()[0]}")


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """One job per value of each sweep (`attention=mha,gqa`), the other sweeps at their first value, so a removed
    option anywhere in a sweep is found without composing every combination."""
    jobs = [first_of_each_sweep(overrides)]
    for i, override in enumerate(overrides):
        key, _, values = override.partition("=")
        if "," in values and not values.startswith("["):
            jobs += [[*jobs[0][:i], f"{key}={value}", *jobs[0][i + 1:]] for value in values.split(",")[1:]]
    return jobs


def compose(overrides: list[str]) -> DictConfig:
    try:
        return compose_train(CONFIGS, overrides)
    except HydraException as err:
        raise ValueError(explain(err, CONFIGS, overrides)) from None


def holds_placeholder(cfg: DictConfig) -> bool:
    """Whether a preset leaves a value to the reader (finetune_shakespeare's init_from: <GPT-2 folder>)."""
    return bool(PLACEHOLDER.search(OmegaConf.to_yaml({k: cfg[k] for k in cfg if k != "hydra"})))


def check_train(args: list[str]) -> None:
    """Every job composes (no typo'd key, no removed option); each is value-checked as train.py checks it before
    any work, leaving out the values the reader supplies."""
    flags = {a for a in args if a.startswith("-")}
    assert flags <= TRAIN_FLAGS, f"python train.py has no rule here for {flags - TRAIN_FLAGS}"
    if flags & {"--help", "-h"}:
        return
    overrides = [a for a in args if not a.startswith("-") and a != STAND_IN]  # a bare <same overrides>
    for job in sweep_jobs(overrides):
        cfg = compose(job)
        given = [o for o in job if STAND_IN not in o]
        if given != job:
            cfg = compose(given)
        if not holds_placeholder(cfg):
            check_config(cfg)


def check_front_door(args: list[str], inline: bool) -> None:
    """The verb exists and its parser reads the arguments; prose may name a verb alone (`python -m gpt prepare`)."""
    if args[:1] == [STAND_IN]:  # `python -m gpt <verb>`: the front door itself
        return
    if not args or args[0] in ("-h", "--help"):
        assert front_door(args) == 0
        return
    parser = parser_for(args[0])
    if not {"-h", "--help"} & set(args) and not (inline and len(args) == 1):
        parser.parse_args(args[1:])


def check_bench(args: list[str]) -> None:
    script = ROOT / args[0]
    assert script.is_file(), f"{args[0]} does not exist"
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if hasattr(module, "parse_args"):
        module.parse_args(args[1:])


def check_bash(args: list[str]) -> None:
    """A script of the project's that bash parses (`bash -n`); running it may need what CI lacks, a GPU."""
    script = ROOT / args[0]
    assert script.is_file(), f"{args[0]} does not exist"
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr


def check_pip(args: list[str]) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert args[0] == "install", args
    for previous, arg in zip(args, args[1:]):
        if previous == "-c":
            assert (ROOT / arg).is_file(), f"{arg} does not exist"
        named = re.fullmatch(r"\.\[([\w,]+)\]", arg)
        if named:
            assert set(named.group(1).split(",")) <= set(extras), f"{arg}: extras are {', '.join(extras)}"


def check_python(args: list[str], inline: bool) -> None:
    if args[:2] == ["-m", "gpt"]:
        check_front_door(args[2:], inline)
    elif args[0] == "-m":
        assert args[1] in ("pytest",), f"python -m {args[1]}: commands are python -m gpt <verb>"
    elif args[0] == "train.py":
        check_train(args[1:])
    elif args[0] == "generate.py":
        generate.parse_args(args[1:])
    elif args[0].startswith("bench/"):
        check_bench(args)
    else:
        pytest.fail(f"no rule checks python {args[0]}")


def check_command(argv: list[str], inline: bool) -> None:
    while re.fullmatch(r"[A-Z_]+=\S*", argv[0]):  # an environment setting before the program
        argv = argv[1:]
    if argv[0] in ("/usr/bin/time", "srun"):
        argv = argv[1:]
    program, *args = argv
    if program == "torchrun":  # torchrun's own flags, then the script and its arguments
        check_python(args[next(i for i, a in enumerate(args) if a.endswith(".py")):], inline)
    elif program == "python":
        check_python(args, inline)
    elif program == "pip":
        check_pip(args)
    elif program == "bash":
        check_bash(args)
    else:
        assert program in OUTSIDE, f"no rule checks the command {program}"


@pytest.mark.parametrize("where, line, inline", command_lines(), ids=[where for where, *_ in command_lines()])
def test_every_command_works_as_written(where: str, line: str, inline: bool, monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # nothing a check might write lands in the checkout
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # a benchmark imports its neighbours, as when run
    for argv in commands(line):
        with refused_in_one_line(f"{where}: {' '.join(argv)}"):
            check_command(argv, inline)


def python_blocks() -> list:
    """The ```python blocks; one that promises an answer runs on the model that learned the calculator (slow)."""
    return [pytest.param(page, code, id=f"{page}:{line}", marks=[pytest.mark.slow] if PROMISE.search(code) else [])
            for page, line, code in fenced("python")]


@pytest.mark.parametrize("page, code", python_blocks())
def test_every_python_block_runs_as_written(page: str, code: str, request: pytest.FixtureRequest,
                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    """A block that loads outputs/<date>/<time> loads a run folder trained once per session instead."""
    promise = PROMISE.search(code)
    if RUN_FOLDER.search(code):
        run = request.getfixturevalue("learned_calculator")[0] if promise else request.getfixturevalue("trained")
        code = RUN_FOLDER.sub(str(run), code)
    monkeypatch.chdir(tmp_path)  # files a block writes (view.html, a Hugging Face folder) land here
    exec(compile(code, page, "exec"), {"__name__": "__docs__"})
    if promise:
        assert capsys.readouterr().out == f"{promise.group(2).strip()}\n"


@pytest.mark.slow  # through the learned_calculator fixture, shared with tests/test_learning.py
def test_the_quick_start_answer_is_true_held_out_and_what_generate_prints(
        learned_calculator: tuple[Path, float, dict[str, float]], capsys: pytest.CaptureFixture) -> None:
    # The README's problem is a held-out one that the default run's model and this test's both answer by a wide margin
    # (the widest of the 1,000 held-out additions for the default run's, its smallest logit gap 5.2; this test's 5.6,
    # on an AMD EPYC): the earlier problem, ninety nine plus ninety nine, flipped to a wrong answer for an earlier model
    # of this test when the written-out attention's rounding changed, a model 92% right on additions.
    readme = (ROOT / "README.md").read_text()
    prompt, promised = next(PROMISE.search(code).groups() for page, _, code in fenced("python")
                            if page == "README.md" and PROMISE.search(code))
    problem = next(p for p in all_problems() if p.prompt == prompt)
    assert promised.strip() == problem.target  # the answer is the true one
    assert front_door(["which-split", prompt]) == 0
    assert "is in the test split of data.seed=0" in capsys.readouterr().out  # held out from the default run
    assert f'python generate.py --prompt "{prompt}"' in readme
    assert generate.main(["--ckpt", str(learned_calculator[0]), "--prompt", prompt]) == 0
    assert capsys.readouterr().out == f"{prompt} {problem.target}\n"  # the CLI prints the same answer


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci/run").read_text().splitlines()
    command = ci[ci.index("# README command 2 (kept identical to the README):") + 1]
    assert f"```bash\n{command}\n```" in (ROOT / "README.md").read_text()


def test_the_readme_names_every_verb_of_the_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"`python -m gpt --help` lists the other commands:\s+([^.]+)\.", readme).group(1)
    listed = [verb.strip() for verb in listed.split(",")]
    assert listed == list(VERBS), (f"README.md's list after `python -m gpt --help` lists the other commands: is "
                                   f"{', '.join(listed)}; VERBS in gpt/__main__.py has {', '.join(VERBS)}")


def test_the_docs_name_every_file_a_sweep_writes() -> None:
    """They said a sweep ends with report.md and loss.png, and that a matrix comes on the attention tasks: a
    calculator sweep also writes matrix.png and pareto.png, and every report a cost card."""
    section = re.search(r"^## The report\n(.*?)^## ", (ROOT / "docs/sweeps.md").read_text(), re.S | re.M).group(1)
    readme = re.search(r"^A sweep ends with (.*?)\n\n", (ROOT / "README.md").read_text(), re.S | re.M).group(1)
    for where, text in (("docs/sweeps.md's report section", section), ("README.md's sweep paragraph", readme)):
        missing = [name for name in (REPORT, *FIGURES, "capability matrix", "cost card") if name not in text]
        assert not missing, f"{where} does not name: {', '.join(missing)}"


def config_keys() -> list[str]:
    """Every key a user can set, as typed on the command line (data.tasks.recall.pairs), from configs/."""
    keys = set(OmegaConf.load(CONFIGS / "train.yaml")) - {"defaults", "hydra"}
    for path in sorted(CONFIGS.glob("*/*.yaml")):
        if path.parent.name == "experiment":
            continue
        package = re.search(r"^# @package (\S+)", path.read_text(), re.M)
        prefix = {"_global_": ""}.get(package.group(1), package.group(1)) if package else path.parent.name

        keys |= set(walk(OmegaConf.to_container(OmegaConf.load(path)), prefix))
    return sorted(keys)


def walk(node: dict, at: str) -> Iterator[str]:
    """The dotted keys of a config's leaves (a section such as data.tasks.recall is not itself a key)."""
    for key, value in node.items():
        name = f"{at}.{key}".lstrip(".")
        if key in ("defaults", "_target_", "hydra"):
            continue
        if isinstance(value, dict) and value:
            yield from walk(value, name)
        else:
            yield name


def test_every_config_key_and_option_is_named_in_the_configuration_page() -> None:
    page = (ROOT / "docs/configuration.md").read_text()
    missing = [key for key in config_keys() if not re.search(rf"`{re.escape(key)}[`=]", page)]
    options = sorted(f"{p.parent.name}={p.stem}" for p in CONFIGS.glob("*/*.yaml"))
    missing += [option for option in options if f"`{option.split('=')[1]}`" not in page]
    # optim.schedule's values are no group's options, so the line above does not see a new one
    schedule_row = re.search(r"^\| `optim\.schedule` \|.*$", page, re.M).group(0)
    missing += [f"optim.schedule={name}" for name in SCHEDULES if f"`{name}`" not in schedule_row]
    assert not missing, f"docs/configuration.md does not name: {', '.join(missing)}"


def test_the_groups_table_has_a_row_for_every_group_and_the_launchers_are_all_named() -> None:
    """python train.py --help listed experiment/lr and experiment/state, which the table left out, and the launchers
    named were cores, basic and slurm, without joblib: the option check above reads configs/*/*.yaml alone."""
    page = (ROOT / "docs/configuration.md").read_text()
    table = re.search(r"^## Groups\n(.*?)^## ", page, re.S | re.M).group(1)
    rows = {row.group(1): row.group(2) for row in re.finditer(r"^\| `([\w/]+)` \| (.*?) \|", table, re.M)}
    in_groups = {str(p.parent.relative_to(CONFIGS)) for p in CONFIGS.rglob("*.yaml") if p.parent != CONFIGS}
    missing = [f"{group}: {', '.join(absent)}" if group in rows else f"{group} (no row)"
               for group in sorted(g for g in in_groups if not g.startswith("hydra"))
               if group not in rows or (absent := [option for option in group_options(CONFIGS, group)
                                                   if f"`{option}`" not in rows[group]])]
    assert not missing, f"docs/configuration.md's groups table does not name: {'; '.join(missing)}"
    launchers = re.search(r"`hydra/launcher=` how a sweep's jobs run:(.*?)\n\n", page, re.S).group(1)
    unnamed = [option for option in group_options(CONFIGS, "hydra/launcher") if f"`{option}`" not in launchers]
    assert not unnamed, f"docs/configuration.md's launchers do not name: {', '.join(unnamed)}"


def test_the_model_page_describes_and_the_readme_counts_every_attention_variant() -> None:
    # The contributor guide said the docs test failed until a new variant was named in model.md; it checked only
    # configuration.md, and the README's count stayed at the old number.
    section = re.search(r"^## Attention variants\n(.*?)^## ", (ROOT / "docs/model.md").read_text(), re.S | re.M)
    missing = [name for name in ATTENTION if f"`{name}`" not in section.group(1)]
    assert not missing, f"docs/model.md's table of attention variants does not describe: {', '.join(missing)}"
    counted = re.search(r"\((\d+) attention variants", (ROOT / "README.md").read_text())
    assert int(counted.group(1)) == len(ATTENTION), \
        f"README.md counts {counted.group(1)} attention variants; ATTENTION registers {len(ATTENTION)}"


def test_the_docs_name_every_positional_encoding_and_those_that_draw_positions() -> None:
    # The guide to adding an encoding said the docs test failed until model.md named it: nothing checked model.md,
    # and configuration.md's list of the encodings model.random_positions draws for could go stale either way.
    section = re.search(r"^## Positional encodings\n(.*?)^## ", (ROOT / "docs/model.md").read_text(), re.S | re.M)
    missing = [name for name in POSITIONAL if f"`{name}`" not in section.group(1)]
    assert not missing, f"docs/model.md's table of positional encodings does not describe: {', '.join(missing)}"
    row = re.search(r"^\| `model\.random_positions` \|.*$", (ROOT / "docs/configuration.md").read_text(), re.M)
    named = [name for name in re.findall(r"`(\w+)`", row.group(0)) if name in POSITIONAL]
    drawable = [name for name, encoding in POSITIONAL.items() if encoding.drawable]
    assert sorted(named) == sorted(drawable), \
        f"docs/configuration.md's model.random_positions row names {', '.join(named)}; the encodings with drawable = " \
        f"True are {', '.join(drawable)}"


def named_in_docs() -> list[str]:
    """The modules and objects (`gpt.model.attention`, `gpt.hf.from_hf`) and files (`tests/test_tasks.py`) the pages
    name, so a move that leaves the docs behind is found."""
    text = "\n".join(page.read_text() for page in PAGES)
    return sorted(set(re.findall(r"\bgpt(?:\.[A-Za-z_]\w*)+|\b(?:tests|bench|configs)/[\w/]+\.\w+", text)))


def exists(name: str) -> bool:
    if "/" in name:
        return (ROOT / name).is_file()
    module, _, attribute = name.rpartition(".")
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        return hasattr(importlib.import_module(module), attribute)
    return True


def test_every_module_and_file_the_docs_name_exists() -> None:
    missing = [name for name in named_in_docs() if not exists(name)]
    assert not missing, f"the docs name what does not exist: {', '.join(missing)}"

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    prose = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#+ (.+)$", prose, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page: Path) -> None:
    prose = FENCE.sub("", page.read_text())
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert not broken, f"{relative(page)} links to what does not exist: {', '.join(broken)}"
