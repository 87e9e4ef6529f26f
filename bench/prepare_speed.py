"""Corpus preparation speed: MiB/s of `python -m gpt prepare` on generated corpora (stories of Zipf-distributed
words, separated by <|endoftext|>) for each tokenizer and number of processes, the peak memory of the preparing
process tree (PSS summed over its workers), and the data start-up of a training run on the prepared corpus (finding,
checking and mapping the shards, then the first batch), which should not grow with the corpus. Each corpus is
generated once and prepared by every tokenizer and process count; `CPU s / s` near the process count says the
cores were the run's own (the trained BPE learns on every core, tokenizers' threads, whatever --num-proc).

    python bench/prepare_speed.py          # 64 MiB, 512 MiB and 2 GiB; char, gpt2, bpe; 1 and 2 processes: ~15 min
    python bench/prepare_speed.py --sizes 64 --tokenizers char gpt2 bpe --procs 1 2 --dir /tmp/prepare_bench
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing
from gpt.data.tokenizers.learned import TOKENIZERS  # noqa: E402
from gpt.machine import cpu_description  # noqa: E402
from gpt.validate import positive_int  # noqa: E402

BPE_FEWEST = 258  # the smallest vocabulary BPETokenizer.learn takes: more than 256 bytes and end-of-text
STARTUP = """
import sys, time
from gpt.data.corpus import TextData
t = time.perf_counter()
data = TextData(block_size=256, path=sys.argv[1], tokenizer=sys.argv[2], root=sys.argv[3], batch_size=32,
                **({"vocab_size": int(sys.argv[4])} if len(sys.argv) > 4 else {}))
data.setup()
next(iter(data.train_dataloader()))
print(time.perf_counter() - t)
"""


def tokenizer_name(text: str) -> str:
    """What `python -m gpt prepare --tokenizer` takes: a tokenizer's name or a Hugging Face model folder."""
    if text not in TOKENIZERS and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is none of {', '.join(TOKENIZERS)} nor a model folder")
    # Absolute: prepare runs from the repository, where a relative folder would name another place.
    return text if text in TOKENIZERS else str(Path(text).resolve())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[64, 512, 2048],
                        help="corpus sizes in MiB (at least: stories are written ~2 MiB at a time)")
    parser.add_argument("--tokenizers", type=tokenizer_name, nargs="+", default=["char", "gpt2", "bpe"],
                        help=f"{', '.join(TOKENIZERS)}, or a Hugging Face model folder")
    parser.add_argument("--procs", type=positive_int, nargs="+", default=[1, 2])
    parser.add_argument("--vocab-size", type=int, default=4096, help="of the trained BPE")
    parser.add_argument("--dir", default=None, help="where corpora and shards are written, in a new folder removed "
                        "after (default: in the system's temporary directory)")
    args = parser.parse_args(argv)
    if "bpe" in args.tokenizers and args.vocab_size < BPE_FEWEST:
        parser.error(f"--vocab-size {args.vocab_size} is too small for the byte-level BPE: give {BPE_FEWEST} or more, "
                     "e.g. --vocab-size 4096")
    return args


def generate(path: Path, megabytes: int, seed: int = 0) -> None:
    """Stories of 3-10 sentences of 4-15 words drawn from a Zipf law over 20,000 made-up words, built with array
    operations (a 2 GB corpus in under a minute): each drawn word is looked up in a table of its written forms
    (capitalized first in its sentence, with a full stop last, with the marker last in its story)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkqjxz"))
    words = ["".join(rng.choice(letters, rng.integers(1, 10))) for _ in range(20_000)]
    cdf = np.cumsum(1.0 / np.arange(1, len(words) + 1))
    forms = np.array([*(w + " " for w in words), *(w.capitalize() + " " for w in words),
                      *(w + ". " for w in words), *(w + ".\n<|endoftext|>\n" for w in words)], dtype=object)
    with open(path, "w") as f:
        while f.tell() < megabytes << 20:
            sentences = rng.integers(3, 11, 2_000)  # per story
            lengths = rng.integers(4, 16, int(sentences.sum()))  # words per sentence
            drawn = np.searchsorted(cdf, rng.random(int(lengths.sum())) * cdf[-1], side="right")
            first = np.cumsum(lengths) - lengths  # each sentence's first word, then its last
            form = np.zeros(len(drawn), np.int64)
            form[first] = 1
            form[first + lengths - 1] = 2
            form[np.cumsum(lengths)[np.cumsum(sentences) - 1] - 1] = 3
            f.write("".join(forms[drawn + form * len(words)].tolist()))


def peak_memory(command: list[str]) -> tuple[float, float, float, str]:
    """(seconds, CPU seconds of the process and its children, their peak MiB of memory sampled every 50 ms, stdout).
    CPU seconds near processes x seconds say the cores were the command's own; far less, that it shared them."""
    start, peak = time.perf_counter(), 0
    # A file, not a pipe: nothing reads stderr while the command runs, and a full pipe would stall it.
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True)
        while not (waited := os.wait4(proc.pid, os.WNOHANG))[0]:
            peak = max(peak, tree_pss(proc.pid))
            time.sleep(0.05)
        seconds, (_, status, usage) = time.perf_counter() - start, waited
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            errors.seek(0)
            failed(command, errors.read())
    return seconds, usage.ru_utime + usage.ru_stime, peak / 1024, proc.stdout.read()


def failed(command: list[str], stderr: str) -> None:
    """Ends the run in one line: the command that failed and its own last error line, the reason it gave."""
    reason = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "no error output")
    sys.exit(f"error: {shlex.join(command)} failed: {reason}")


def tree_pss(pid: int) -> int:
    """KB of memory of `pid` and all its descendants, from /proc: PSS, which splits the pages forked workers
    share with their parent among them, so the sum counts each page once (RSS would count it in every process)."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        pss = next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
        children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                    for c in (task / "children").read_text().split()]
    except (OSError, ValueError):
        return 0
    return pss + sum(tree_pss(child) for child in children)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    # A folder of its own, even inside --dir: removing --dir itself would take whatever else the user keeps there.
    work = Path(tempfile.mkdtemp(prefix="prepare_speed_", dir=args.dir)).resolve()
    began = time.perf_counter()
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"CPU: {cpu_description()}")
    print("| corpus | tokenizer | processes | MiB/s | CPU s / s | peak memory (PSS) MiB | data start-up s |")
    print("|---|---|---|---|---|---|---|")
    try:
        for size in args.sizes:
            corpus = work / f"stories_{size}MB.txt"
            generate(corpus, size)  # once per size, for every tokenizer and process count
            megabytes = corpus.stat().st_size / 2**20
            for tokenizer in args.tokenizers:
                startup = None
                for procs in args.procs:
                    root = work / "data"
                    shutil.rmtree(root, ignore_errors=True)
                    sized = ["--vocab-size", str(args.vocab_size)] if tokenizer == "bpe" else []  # bpe's alone
                    seconds, cpu, pss, _ = peak_memory([sys.executable, "-m", "gpt", "prepare", str(corpus),
                                                        "--tokenizer", tokenizer, *sized,
                                                        "--num-proc", str(procs), "--root", str(root)])
                    if startup is None:  # the shards are the same whatever the processes: one start-up tells
                        timed = [sys.executable, "-c", STARTUP, str(corpus), tokenizer, str(root), *sized[1:]]
                        done = subprocess.run(timed, cwd=ROOT, capture_output=True, text=True)
                        if done.returncode:
                            failed([*timed[:2], "<data start-up>", *timed[3:]], done.stderr)
                        startup = float(done.stdout)
                    print(f"| {megabytes:.0f} MiB | {tokenizer} | {procs} | {megabytes / seconds:.1f} | "
                          f"{cpu / seconds:.2f} | {pss:.0f} | {startup:.2f} |", flush=True)
            corpus.unlink()
        print(f"\n{(time.perf_counter() - began) / 60:.1f} minutes in all")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
