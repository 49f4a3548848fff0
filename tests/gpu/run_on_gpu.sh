#!/usr/bin/env bash
# torchgate's GPU checks in one command, on a machine with a CUDA device:
#
#   bash tests/gpu/run_on_gpu.sh              the `gpu` tests and the simulated-device tests,
#                                             then the GPU matrix of tests/gpu/params.yaml
#                                             (cuda x fp32, tf32, bf16 x eager, compiled;
#                                             hot, cold and graph series; loader_train's
#                                             pinned copies, energy) through the bench,
#                                             numerics, compare, report and migration
#                                             (cuda-fp32 -> cuda-bf16) stages, without
#                                             DVC; results in $OUT (default .gpu-results/)
#   bash tests/gpu/run_on_gpu.sh --compose    rewrite tests/gpu/params.yaml from conf/ and
#                                             tests/gpu/overrides (needs the dev install)
#   bash tests/gpu/run_on_gpu.sh --prepare    --compose, then download the wheels a bare GPU
#                                             machine may lack (PyYAML, pytest and what it
#                                             needs on Python 3.10, tabulate, nvidia-ml-py)
#                                             into .wheels/: carry that folder
#
# On the GPU machine it needs Python with a CUDA build of torch, numpy, scipy and git; what
# else is missing is installed from .wheels/ (TORCHGATE_WHEELS) without an index.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3}
WHEELS=${TORCHGATE_WHEELS:-$ROOT/.wheels}
OUT=${OUT:-$ROOT/.gpu-results}
say() { echo "torchgate gpu: $*"; }

compose() {
    (cd "$ROOT" && "$PYTHON" - <<'PY'
from pathlib import Path
from torchgate.compose import compose
compose(Path("tests/gpu/params.yaml"), Path("tests/gpu/overrides").read_text().split())
print("torchgate gpu: wrote tests/gpu/params.yaml")
PY
    )
}

if [[ "${1:-}" == "--compose" || "${1:-}" == "--prepare" ]]; then
    compose || exit 2
    if [[ "$1" == "--prepare" ]]; then
        for version in 3.10 3.11 3.12 3.13; do
            "$PYTHON" -m pip download -q --only-binary=:all: --python-version "$version" \
                --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
                -d "$WHEELS" pyyaml pytest tabulate nvidia-ml-py exceptiongroup tomli || exit 2
        done
        say "wheels in $WHEELS ($(ls "$WHEELS" | wc -l) files, $(du -sh "$WHEELS" | cut -f1))"
    fi
    exit 0
fi

# ---- what the machine has -----------------------------------------------------------------
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
    say "error: $PYTHON has no torch that sees a CUDA device"; exit 2; }
command -v git >/dev/null || { say "error: git is not installed (the stages keep their baseline in git)"; exit 2; }
missing=()
for pair in yaml:pyyaml pytest:pytest tabulate:tabulate pynvml:nvidia-ml-py numpy:numpy scipy:scipy; do
    "$PYTHON" -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair#*:}")
done
# Installed into a folder of their own on PYTHONPATH (the stages' worker processes inherit
# it), leaving the machine's Python as it is.
DEPS=$(mktemp -d)
export PYTHONPATH="$DEPS${PYTHONPATH:+:$PYTHONPATH}"
# torchgate itself, not installed: its folder, stages/, under its import name (core.names).
ln -s "$ROOT/stages" "$DEPS/torchgate"
if (( ${#missing[@]} )); then
    say "installing ${missing[*]} from $WHEELS"
    for package in "${missing[@]}"; do
        "$PYTHON" -m pip install -q --no-index --find-links "$WHEELS" --target "$DEPS" \
            "$package" || say "warning: could not install $package from $WHEELS"
    done
fi
for module in yaml numpy scipy tabulate; do
    "$PYTHON" -c "import $module" 2>/dev/null || {
        say "error: $module is missing; run tests/gpu/run_on_gpu.sh --prepare where an index is reachable and carry .wheels/"; exit 2; }
done
"$PYTHON" - <<'PY'
import torch
p = torch.cuda.get_device_properties(0)
print(f"torchgate gpu: {torch.cuda.get_device_name()} ({p.total_memory / 2**30:.0f} GiB), "
      f"torch {torch.__version__}, CUDA {torch.version.cuda}")
PY
status=0

# ---- the tests --------------------------------------------------------------------------------
if "$PYTHON" -c "import pytest" 2>/dev/null; then
    # One test process (the project's -n auto left out): GPU timings are not taken two at
    # a time, and this machine may lack pytest-xdist.
    (cd "$ROOT" && "$PYTHON" -m pytest -q -rs -p no:cacheprovider -o addopts="--strict-markers" \
        tests/test_gpu.py \
        tests/test_gpu_timing.py tests/test_energy.py tests/test_steps.py -m "not slow") 2>&1 \
        | tee "$OUT/pytest.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
else
    say "pytest is missing: tests not run"; status=1
fi

# ---- the GPU matrix, stage by stage, in a scratch project ---------------------------------
WORK=$(mktemp -d)/project
mkdir -p "$WORK/reports" "$WORK/../import"
cp -r "$ROOT/stages" "$ROOT/conf" "$ROOT/dvc.yaml" "$WORK/"
ln -s "$WORK/stages" "$WORK/../import/torchgate"      # the project's own torchgate
cp "$ROOT/tests/gpu/params.yaml" "$WORK/params.yaml"
find "$WORK" -name __pycache__ -prune -exec rm -rf {} +
(cd "$WORK" && git init -q && git add -A \
    && git -c user.name=torchgate -c user.email=torchgate@localhost commit -qm "GPU run") || exit 2
run_stage() {
    say "python -m $*"
    (cd "$WORK" && PYTHONPATH="$WORK/../import:$WORK:$PYTHONPATH" "$PYTHON" -m "$@") \
        || { say "failed: $*"; status=1; }
}
# After every cell: what is there so far, so that a run cut short still leaves results.
results() {
    rm -rf "$OUT/reports" && cp -r "$WORK/reports" "$OUT/reports"
    (cd "$WORK" && PYTHONPATH="$WORK/../import:$WORK:$PYTHONPATH" "$PYTHON" \
        "$ROOT/tests/gpu/summarize.py" "$WORK") \
        > "$OUT/gpu-summary.md" || { say "summary failed"; status=1; }
}
started=$SECONDS
run_stage torchgate.env
# bf16 first: the cell the headline numbers come from. TORCHGATE_GPU_CELLS="bf16 fp32"
# measures those precisions only.
precisions=${TORCHGATE_GPU_CELLS:-$(cd "$WORK" && "$PYTHON" -c "
import yaml
chosen = yaml.safe_load(open('params.yaml'))['cells']['precisions']
print(*sorted(chosen, key=lambda p: p != 'bf16'))")}
for precision in $precisions; do
    run_stage torchgate.bench --device cuda --precision "$precision"
    results
    run_stage torchgate.numerics --device cuda --precision "$precision"
done
run_stage torchgate.compare
run_stage torchgate.report
# Is it worth moving? fp32 -> bf16 on this GPU (tests/gpu/overrides declares the pair).
if [[ " $precisions " == *" fp32 "* && " $precisions " == *" bf16 "* ]]; then
    run_stage torchgate.migration --pair cuda_fp32_to_bf16
fi
say "matrix took $(( SECONDS - started )) s"
results
cat "$OUT/gpu-summary.md"
say "results in $OUT (gpu-summary.md, reports/, pytest.txt, run.log); exit $status"
exit $status
