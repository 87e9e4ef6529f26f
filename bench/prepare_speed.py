"""Corpus preparation speed: MB/s of `python -m gpt.prepare` on generated corpora (stories of Zipf-distributed
words, separated by <|endoftext|>) for each tokenizer and number of processes, the peak memory of the preparing
process tree (PSS summed over its workers), and the data start-up of a training run on the prepared corpus (finding,
checking and mapping the shards, then the first batch), which should not grow with the corpus.

    python bench/prepare_speed.py          # 64 MB, 512 MB and 2 GB; char, gpt2, bpe; 1 and 2 processes
    python bench/prepare_speed.py --sizes 64 --tokenizers char gpt2 bpe --procs 1 2 --dir /tmp/prepare_bench
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STARTUP = """
import sys, time
from gpt.data import TextData
t = time.perf_counter()
data = TextData(block_size=256, path=sys.argv[1], tokenizer=sys.argv[2], vocab_size=int(sys.argv[4]),
                root=sys.argv[3], batch_size=32)
data.setup()
next(iter(data.train_dataloader()))
print(time.perf_counter() - t)
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512, 2048], help="corpus sizes in MB")
    parser.add_argument("--tokenizers", nargs="+", default=["char", "gpt2", "bpe"])
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--vocab-size", type=int, default=4096, help="of the trained BPE")
    parser.add_argument("--dir", default=None, help="where corpora and shards are written, removed after "
                        "(default: a new folder in the system's temporary directory)")
    return parser.parse_args(argv)


def generate(path: Path, megabytes: int, seed: int = 0) -> None:
    """Stories of 3-10 sentences of 4-15 words drawn from a Zipf law over 20,000 made-up words."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkqjxz"))
    words = np.array(["".join(rng.choice(letters, rng.integers(1, 10))) for _ in range(20_000)])
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    with open(path, "w") as f:
        while f.tell() < megabytes << 20:
            stories = []
            for _ in range(1000):
                lengths = rng.integers(4, 16, rng.integers(3, 11))
                drawn = iter(rng.choice(words, int(lengths.sum()), p=weights))
                sentences = (" ".join(next(drawn) for _ in range(n)).capitalize() + "." for n in lengths)
                stories.append(" ".join(sentences) + "\n<|endoftext|>\n")
            f.write("".join(stories))


def peak_memory(command: list[str]) -> tuple[float, float, str]:
    """(seconds, peak MB of memory of the process and its children, stdout), sampled every 50 ms."""
    start, peak = time.perf_counter(), 0
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    while proc.poll() is None:
        peak = max(peak, tree_pss(proc.pid))
        time.sleep(0.05)
    out = proc.stdout.read()
    if proc.returncode:
        sys.exit(f"failed: {' '.join(command)}")
    return time.perf_counter() - start, peak / 1024, out


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
    work = Path(args.dir or tempfile.mkdtemp(prefix="prepare_speed_")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print("| corpus | tokenizer | processes | MB/s | peak memory (PSS) MB | data start-up s |")
    print("|---|---|---|---|---|---|")
    try:
        for size in args.sizes:
            corpus = work / f"stories_{size}MB.txt"
            generate(corpus, size)
            megabytes = corpus.stat().st_size / 2**20
            for tokenizer in args.tokenizers:
                for procs in args.procs:
                    root = work / "data"
                    shutil.rmtree(root, ignore_errors=True)
                    seconds, pss, _ = peak_memory([sys.executable, "-m", "gpt.prepare", str(corpus), "--tokenizer",
                                                tokenizer, "--vocab-size", str(args.vocab_size), "--num-proc",
                                                str(procs), "--root", str(root)])
                    startup = subprocess.run([sys.executable, "-c", STARTUP, str(corpus), tokenizer, str(root),
                                              str(args.vocab_size)],
                                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
                    print(f"| {megabytes:.0f} MB | {tokenizer} | {procs} | {megabytes / seconds:.1f} | {pss:.0f} | "
                          f"{float(startup):.2f} |", flush=True)
            corpus.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
