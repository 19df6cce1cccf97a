#!/usr/bin/env bash
# Runs the GPU checks on a lent GPU machine, from what scripts/gpu/pack.sh packed into .gpu/.
# Writes logs under $OUT (the device tool brings them back) and prints a short summary last.
#
#   scripts/gpu/run.sh [STEP ...]    steps, in the order given (default: conformance tests nccl ops bench):
#     conformance  the op-conformance test first (every op x every dtype the CUDA backend accepts,
#                against the CPU backend), then the model and step on the GPU one feature at a
#                time: GPT-2 against the CPU, BERT against the CPU, resume, Sophia, ZeRO-1
#                (stops at the first failing feature)                         -> $OUT/conformance.log
#     tests      every tests/cuda test (none may be skipped on a GPU)       -> $OUT/cuda_tests.log
#     suites     the same tests, each suite in a process of its own, MPTRAIN_GPU_JOBS (default 6)
#                at a time on the one GPU, each under MPTRAIN_GPU_SUITE_S seconds (default 300):
#                a fault, abort or hang costs its suite alone; MPTRAIN_GPU_SUITES (a regex)
#                picks suites                                      -> $OUT/suites.tar.xz, suites.txt
#     nccl       the NCCL communicator, and train --device cuda at world 1 (rerun, ZeRO-1, resume)
#                and on two GPUs where there are two                -> $OUT/nccl.log, nccl_train.log
#     sanitize   compute-sanitizer memcheck (the op tests and the conformance test) + racecheck
#                (LN, CE, attention, Sophia), each under MPTRAIN_GPU_SANITIZE_S seconds
#                (default 300)                                                -> $OUT/sanitize.log
#     ops        bench_cuda_ops (every op at GPT-2 124M sizes)              -> $OUT/ops_bench.log
#     bench      mptrain bench --device cuda (gpt2, T=1024): fp32, tf32, then bf16 with the
#                PyTorch GPU peer (bf16 autocast + torch.compile + flash SDPA); then BERT-base bf16
#                                                                            -> $OUT/bench.log
#     ladder     mptrain bench --device cuda --ladder (gpt2, T=1024): fp32, tf32, bf16, fused
#                epilogues, flash attention, padded vocabulary, then the PyTorch GPU peer and
#                issue 20's targets                                          -> $OUT/ladder.log
#     peer       bench/pytorch_gpt2_cuda.py alone: PyTorch's own ladder        -> $OUT/peer.log
#     cpu        issue 4's CPU target on the host CPU (a Sapphire Rapids with AMX where the H100s
#                are): the CPU precision ladder, gpt2 at batch 4 x 256 on 2 threads, with the
#                PyTorch CPU peer (bf16 >= 3x fp32 and >= 2x PyTorch bf16 autocast)
#                                                                            -> $OUT/cpu_ladder.log
# Environment: MPTRAIN_GPU_BATCH (default 16) for bench and peer.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/mptrain-gpu-out}
mkdir -p "$out"
[[ -f .gpu/libs.tar.xz && -d .gpu/bin ]] || { echo "run.sh: no .gpu/ (run scripts/gpu/pack.sh here and carry .gpu)"; exit 2; }

libs=/tmp/mptrain-gpu-libs
rm -rf "$libs" && mkdir -p "$libs" && tar -C "$libs" -xJf .gpu/libs.tar.xz
cuda_lib=$(ls -d /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/targets/x86_64-linux/lib 2>/dev/null | head -1)
# NCCL comes with PyTorch's pip packages there (nvidia-nccl-cu13).
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
# Only our binaries see the packed libraries (python3 and torch keep the image's own zlib etc.).
ours=(env LD_LIBRARY_PATH="$libs/lib:${cuda_lib}:${nccl_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
export PATH="/usr/local/cuda/bin:$PATH"
# The tests that run mptrain as a subprocess take it from here, not from the build tree's path
# compiled into them (tests/common/test_util.h), and their text from the packed fortunes.
export MPTRAIN_TEST_BINARY="$PWD/.gpu/bin/mptrain" MPTRAIN_TEST_FORTUNES_DIR="$PWD/.gpu/fortunes"
B=${MPTRAIN_GPU_BATCH:-16}

summary=()
note() { summary+=("$1"); echo "== $1"; }
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; git log -1 --format='commit %h %s' 2>/dev/null; } \
  | tee "$out/device.log"

# features NAME FILTER...: the CUDA tests one feature (gtest filter) at a time, in order, into
# $out/NAME.log, stopping at the first that fails (what it builds on passed before it). Status 1
# when one failed.
features() {
  local name=$1 filter
  shift
  : >"$out/$name.log"
  for filter in "$@"; do
    echo "=== $filter" >>"$out/$name.log"
    if ! "${ours[@]}" .gpu/bin/mptrain_tests_cuda --gtest_filter="$filter" >"$out/feature.log" 2>&1; then
      cat "$out/feature.log" >>"$out/$name.log"
      note "$name: FAILED at $filter (later features not run; see $name.log)"
      return 1
    fi
    cat "$out/feature.log" >>"$out/$name.log"
    # gtest exits 0 when tests skip: say so (on a GPU machine nothing may skip but the 2-GPU runs).
    note "$name: $(grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ test' "$out/feature.log" | tr -s ' ' | tr '\n' ' ')$filter"
  done
  rm -f "$out/feature.log"
}

run_step() {
  case "$1" in
    tests)
      "${ours[@]}" .gpu/bin/mptrain_tests_cuda 2>&1 | tee "$out/cuda_tests.log" | tail -25
      note "tests: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$out/cuda_tests.log" | tr '\n' ' ')"
      ;;
    suites)
      local dir=/tmp/mptrain-suites
      rm -rf "$dir" && mkdir -p "$dir"
      # Suites by name, except the end-to-end training suites (Train*: minutes each, a CPU run
      # beside every GPU run), which go test by test. MPTRAIN_GPU_SUITES (an extended regex on
      # the suite or test name) narrows the list.
      "${ours[@]}" .gpu/bin/mptrain_tests_cuda --gtest_list_tests |
        awk '/^[^ ]/ {suite = $1; if (suite !~ /^Train/) print suite; next}
             /^  / && suite ~ /^Train/ {print suite $1}' |
        grep -E "${MPTRAIN_GPU_SUITES:-.}" >"$dir/list"
      # suite.sh gets the packed libraries through the environment (xargs cannot pass an array).
      # OMP_NUM_THREADS: the CPU references of a dozen processes with an OpenMP thread per core
      # each oversubscribed the 16 cores: a GPT-2 device suite took 220 s (the memcheck run of 131
      # tests, those suites among them, took 14 s).
      OMP_NUM_THREADS=${MPTRAIN_GPU_SUITE_THREADS:-2} "${ours[@]}" xargs -P "${MPTRAIN_GPU_JOBS:-6}" -I{} scripts/gpu/suite.sh .gpu/bin/mptrain_tests_cuda {} "$dir" \
        "${MPTRAIN_GPU_SUITE_S:-300}" <"$dir/list"
      {
        for f in "$dir"/*.log; do
          grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test|^\[  FAILED  \] [A-Za-z].*\(' "$f" | sed "s|^|$(basename "$f" .log): |"
        done
        echo "--- exit statuses (124: timed out; 134/139: abort/segfault)"
        sort -n "$dir/status"
      } >"$out/suites.txt"
      tar -C "$dir" -cJf "$out/suites.tar.xz" .
      note "suites: $(awk '$1 != 0' "$dir/status" | wc -l) of $(wc -l <"$dir/status") suites failed: $(awk '$1 != 0 {printf "%s(%s) ", $2, $1}' "$dir/status")"
      note "suites: $(cat "$dir"/*.log | grep -cE '^\[       OK \]') tests ok, $(cat "$dir"/*.log | grep -cE '^\[  FAILED  \] [A-Za-z].*\(') failed, $(cat "$dir"/*.log | grep -cE '^\[  SKIPPED \] [A-Za-z]') skipped"
      ;;
    conformance)
      features conformance \
        'Conformance.*' \
        'TrainDeviceGpu.Fp32*' \
        'TrainBertDeviceGpu.*LossesMatchTheCpu*:-TrainBertDeviceGpu.Sophia*' \
        'TrainDeviceGpu.*:-TrainDeviceGpu.WorldOne*:TrainDeviceGpu.Zero*:TrainDeviceGpu.TwoRanks*' \
        'TrainBertDeviceGpu.*:-TrainBertDeviceGpu.TwoRanks*'
      ;;
    nccl)
      "${ours[@]}" .gpu/bin/mptrain_tests_dist --gtest_filter='Nccl*' 2>&1 | tee "$out/nccl.log" | tail -15
      note "nccl: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$out/nccl.log" | tr '\n' ' ')"
      # train --device cuda at world 1 (a rerun, ZeRO-1, its resume), and two ranks if two GPUs;
      # GPT-2 and BERT.
      "${ours[@]}" .gpu/bin/mptrain_tests_cuda \
        --gtest_filter='TrainDeviceGpu.WorldOne*:TrainDeviceGpu.Zero*:TrainDeviceGpu.TwoRanks*:TrainBertDeviceGpu.WorldOne*:TrainBertDeviceGpu.TwoRanks*' 2>&1 \
        | tee "$out/nccl_train.log" | tail -15
      note "world-one/two-rank train: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$out/nccl_train.log" | tr '\n' ' ')"
      ;;
    sanitize)
      # memcheck: the op tests and the conformance test (every op the models reach, as they reach
      # it); the end-to-end Train* tests run mptrain as a child, which the sanitizer would not
      # follow. Each tool under a time limit.
      { timeout -k 10 "${MPTRAIN_GPU_SANITIZE_S:-300}" "${ours[@]}" compute-sanitizer --tool memcheck --error-exitcode 3 \
          .gpu/bin/mptrain_tests_cuda --gtest_brief=1 \
          --gtest_filter='Cuda*:FlashAttentionSizes*:Conformance.*:-CudaBuffer.ImpossibleAllocationIsALibraryError'
        echo "memcheck exit $?"
        timeout -k 10 "${MPTRAIN_GPU_SANITIZE_S:-300}" "${ours[@]}" compute-sanitizer --tool racecheck --error-exitcode 3 \
          .gpu/bin/mptrain_tests_cuda --gtest_brief=1 \
          --gtest_filter='CudaLayerNorm*:CudaCrossEntropy*:*Attention*:*Sophia*:CudaSampledCrossEntropy*'
        echo "racecheck exit $?"; } >"$out/sanitize.log" 2>&1
      note "sanitize: $(grep -E 'exit [0-9]+|ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize.log" | tr '\n' ' ')"
      ;;
    ops)
      "${ours[@]}" .gpu/bin/bench_cuda_ops 20 2>&1 | tee "$out/ops_bench.log" | tail -40
      note "ops: $(wc -l <"$out/ops_bench.log") lines in ops_bench.log"
      ;;
    bench)
      : >"$out/bench.log"
      for p in fp32 tf32; do
        "${ours[@]}" .gpu/bin/mptrain bench --device cuda --precision "$p" --preset gpt2 --batch "$B" --seq 1024 \
          --steps 10 --warmup 3 --no-peer 2>&1 | tee -a "$out/bench.log" | tail -3
      done
      "${ours[@]}" .gpu/bin/mptrain bench --device cuda --precision bf16 --preset gpt2 --batch "$B" --seq 1024 \
        --steps 10 --warmup 3 --python "$(command -v python3)" 2>&1 | tee -a "$out/bench.log" | tail -8
      "${ours[@]}" .gpu/bin/mptrain bench --device cuda --model bert --precision bf16 --preset bert-base --batch 32 \
        --seq 128 --steps 10 --warmup 3 --no-peer 2>&1 | tee -a "$out/bench.log" | tail -3
      note "bench: $(grep -E '^mptrain |^ratio' "$out/bench.log" | tr '\n' ' ')"
      ;;
    ladder)
      "${ours[@]}" .gpu/bin/mptrain bench --device cuda --ladder --preset gpt2 --batch "$B" --seq 1024 --steps 10 \
        --warmup 3 --rounds 1 --python "$(command -v python3)" 2>&1 | tee "$out/ladder.log" | tail -16
      note "ladder: $(grep -E '^\| .* \| [0-9.]+ \|' "$out/ladder.log" | cut -d'|' -f2,3,6 | tr '\n' ' ')"
      ;;
    peer)
      python3 bench/pytorch_gpt2_cuda.py --batch "$B" --seq 1024 2>&1 | tee "$out/peer.log" | tail -20
      note "peer: $(grep -E '^RESULT' "$out/peer.log" | tr '\n' ' ')"
      ;;
    cpu)
      { grep -m1 'model name' /proc/cpuinfo; grep -m1 -o 'amx_bf16' /proc/cpuinfo || echo "no amx_bf16"; } \
        >"$out/cpu_ladder.log"
      OMP_NUM_THREADS=2 "${ours[@]}" .gpu/bin/mptrain bench --preset gpt2 --batch 4 --seq 256 --steps 3 --warmup 1 \
        --ladder --threads 2 --python "$(command -v python3)" 2>&1 | tee -a "$out/cpu_ladder.log" | tail -16
      note "cpu ladder: $(grep -E '^\| (fp32|bf16) ' "$out/cpu_ladder.log" | tr '\n' ' ')"
      ;;
    *) echo "run.sh: unknown step '$1' (conformance tests suites nccl sanitize ops bench peer cpu)"; exit 2 ;;
  esac
}

steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(conformance tests nccl ops bench)
for s in "${steps[@]}"; do run_step "$s"; done
echo; echo "===== summary"; printf '%s\n' "${summary[@]}"
