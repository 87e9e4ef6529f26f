#!/usr/bin/env bash
# Every check that needs a GPU, in one go (a lent GPU is held for minutes, not hours): the gpu-marked tests, the
# default run on the GPU and generation from it, DDP on the machine's GPUs, a two-job -m sweep on the GPU, the cost
# command on the GPU beside Hugging Face and GPT-2-small in bf16 with torch.compile (tokens/s and MFU). Each step has
# a time limit, so one that hangs leaves the rest their time. One log and the cost command's cost.json and cost.png
# go to $OUT (default ./gpu_checks); a line per step says its exit status and seconds. Needs the project's
# dependencies with its hf extra, and pytest with the test extra's plugins (xdist, timeout, hypothesis).
#
#     bash bench/gpu_checks.sh
#     PYTHON=python3 OUT=/tmp/checks bash bench/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_checks}
py=${PYTHON:-python}
# Without a GPU every step failed in its own way (trainer=ddp trained on the CPU) and the script still exited 0.
if ! $py -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
    echo "bench/gpu_checks.sh needs a CUDA GPU and torch sees none here: run it on a GPU machine" >&2
    exit 2
fi
runs=$(mktemp -d)  # run folders stay out of $OUT: only the log and the cost figures are wanted back
mkdir -p "$out"
log="$out/gpu_checks.log"
export PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS COMMAND...: run it under a time limit, its output into the log, a summary line here
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    echo "== $name: $*" | tee -a "$log"
    timeout "$limit" "$@" >>"$log" 2>&1
    rc=$?
    echo "== $name: exit $rc in $((SECONDS - start)) s" | tee -a "$log"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $py -c "import torch, lightning; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  'lightning', lightning.__version__)"; } 2>&1 | tee -a "$log"
# test_notebook.py holds no gpu test, and a GPU image without the test extra's notebook packages cannot import it:
# collected, that one file stopped the whole step (or, let through, made it exit 1 with every gpu test passed).
step tests 240 $py -m pytest -q -n 0 -m gpu -p no:cacheprovider --ignore=tests/test_notebook.py tests
step default_run 75 $py train.py trainer=gpu "hydra.run.dir=$runs/default"
step generate 40 $py generate.py --ckpt "$runs/default" --prompt "ninety nine plus ninety nine equals"
step ddp 75 $py train.py trainer=ddp trainer.max_steps=200 "hydra.run.dir=$runs/ddp"
step gpu_sweep 90 $py train.py -m trainer=gpu attention=mha,gqa trainer.max_steps=200 "hydra.sweep.dir=$runs/sweep"
step cost 170 $py -m gpt cost --device cuda --dtype bfloat16 --depths 1024 16384 65536 --batch 1 8 --hf \
    --out "$out/cost"
step gpt2_small_bf16_compile 150 $py bench/gpu_train.py --steps 150 --warmup 50
grep -E "^== .*exit|done in|tokens/s \(|MFU|peak GPU|^(gpu|torch) |[0-9]+ (passed|failed)|report" "$log"
