#!/usr/bin/env bash
# The GPU plan's jobs (scripts/gpu/plan.txt), each one command that prints its log and exits 0 only
# when everything it checked passed. Run by scripts/gpu/run.sh, which exports BIN, REFS, DATA,
# WORK and MPTRAIN_GPU_LD (the packed libraries' path, for our binaries only).
#
#   jobs.sh gtest FILTER        the CUDA test binary on FILTER; a test that skips fails the job (on a
#                               GPU machine only the two-GPU tests may skip, and no filter names them)
#   jobs.sh suites              every CUDA suite no other job runs, 6 processes at a time, each under
#                               150 s, so a fault or a hang costs its suite alone
#   jobs.sh train REGEX         the rows of train_matrix.sh whose names match: `train --device cuda`,
#                               compared with the CPU reference pack.sh carried (compare_runs.py)
#   jobs.sh resume-cross        a GPU checkpoint resumed on the CPU and a CPU one on the GPU, each
#                               continuing the CPU reference's trajectory
#   jobs.sh commands            eval (loss), generate and fill-mask with --device cuda, on checkpoints
#                               trained for 2 steps on this machine's CPU; eval's loss against the
#                               GPU's plan run on the CPU (--policy-of cuda) within 2%
#   jobs.sh ladder              GPT-2 124M's GPU ladder at B=16, T=1024, the PyTorch peer in the command
#   jobs.sh bert-bench          BERT-base bf16 at seq 128 and its PyTorch peer
#   jobs.sh profile             GPT-2 124M bf16's step op by op (bench --profile on the GPU)
#   jobs.sh peer-profile        the PyTorch peer's step at the same batch, kernel by kernel
#                               (bench/pytorch_gpt2_cuda.py --profile)
#   jobs.sh gpt2-bench B        GPT-2 124M at batch B, the best rung and the PyTorch peer
#   jobs.sh racecheck FILTER    compute-sanitizer racecheck over the CUDA tests on FILTER
#   jobs.sh ncu                 Nsight Compute on our slowest kernels of GPT-2 124M's bf16 step
#   jobs.sh gemm-sweep          bench_cuda_gemm: cuBLASLt's algorithms for each of GPT-2's products, with
#                               the toolkit's cuBLASLt and with PyTorch's (its pip package), if another
#   jobs.sh gpt2-lib-ab         GPT-2 124M B=16 bf16 (no peer), the toolkit's cuBLASLt and PyTorch's, A B A B
#   jobs.sh nsys-kernels        Nsight Systems' kernel table of GPT-2 124M's bf16 step (unsynchronized)
#   jobs.sh ncu-stalls REGEX    Nsight Compute's warp-state, scheduler and pipe sections on the first
#                               kernel of the bf16 step whose name matches (where its warps wait)
#   jobs.sh memcheck            compute-sanitizer memcheck over the conformance test
set -uo pipefail
cd "$(dirname "$0")/../.."
ours() { env LD_LIBRARY_PATH="$MPTRAIN_GPU_LD" "$@"; }
python=$(command -v python3)
# The PyTorch peers are started by our binary and would inherit the packed libraries' path: they
# run through this wrapper, which gives python3 the machine's own path back.
peer_python() {
  local wrapper="$WORK/peer-python"
  printf '#!/bin/sh\nexec env LD_LIBRARY_PATH="%s" "%s" "$@"\n' "${LD_LIBRARY_PATH:-}" "$python" >"$wrapper"
  chmod +x "$wrapper"
  echo "$wrapper"
}

gtest() {
  local log="$WORK/gtest.$$.log"
  ours "$BIN/mptrain_tests_cuda" --gtest_filter="$1" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local ran skipped
  ran=$(grep -cE '^\[       OK \]|^\[  FAILED  \] [A-Za-z].*\(' "$log")
  skipped=$(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$log")
  echo "[jobs] $ran tests ran, $skipped skipped, exit $rc"
  ((rc == 0 && ran > 0 && skipped == 0))
}

suites() {
  local dir="$WORK/suites.$$"
  mkdir -p "$dir"
  # Conformance and the packed sequences are a job of their own, the Train* suites are the train
  # jobs' (their CPU halves come from pack.sh), the two-GPU tests need two GPUs.
  ours "$BIN/mptrain_tests_cuda" --gtest_list_tests | awk '/^[^ ]/ {print $1}' |
    grep -vE '^(Conformance|PackedSequences|Train)' >"$dir/list"
  ours xargs -P 6 -I{} scripts/gpu/suite.sh "$BIN/mptrain_tests_cuda" {} "$dir" 150 <"$dir/list"
  local f
  for f in "$dir"/*.log; do
    echo "----- $(basename "$f" .log)"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test|^\[  FAILED  \] [A-Za-z].*\(|^\[  SKIPPED \] [A-Za-z]' "$f"
    grep -qE '^\[  PASSED  \]' "$f" || tail -30 "$f"
  done
  echo "----- exit statuses (124: timed out; 134/139: abort/segfault)"
  sort -n "$dir/status"
  ! awk '$1 != 0' "$dir/status" | grep -q . && ! grep -qE '^\[  SKIPPED \] [A-Za-z]' "$dir"/*.log
}

source scripts/gpu/train_matrix.sh

# One training run on the GPU: the row's arguments, the GPU's own, and $extra.
gpu_train() {  # ARGS GPU_ARGS RUN_DIR EXTRA LOG
  eval "ours \"\$BIN/mptrain\" $1 --device cuda $2 $4 --run-dir '$3'" >"$5" 2>&1
}

train() {
  local fails=0 rows=0 name ref tol args gpu dir
  mkdir -p "$WORK/train"
  while IFS='|' read -r name ref tol args gpu; do
    [[ $name =~ ^($1)$ ]] || continue
    ((rows++))
    dir="$WORK/train/$name"
    echo "--- $name (tolerance $tol${gpu:+, $gpu}; reference ${ref}: CPU, the GPU's plan)"
    if [[ ! -f "$REFS/$ref.json" ]]; then
      echo "  MISS: no reference $REFS/$ref.json (pack.sh makes them)"
      ((fails++))
      continue
    fi
    if ! gpu_train "$args" "$gpu" "$dir" "--save-every 20" "$dir.log" || ! grep -q "device cuda" "$dir.log"; then
      echo "  MISS: the GPU run failed or did not run on the GPU:"
      tail -15 "$dir.log"
      ((fails++))
      continue
    fi
    "$python" scripts/gpu/compare_runs.py compare "$REFS/$ref.json" "$dir" --tol "$tol" || ((fails++))
  done < <(matrix_rows)
  echo "[jobs] train '$1': $rows rows, $fails missed"
  ((rows > 0 && fails == 0))
}

# Checkpoints across devices, each resumed at step 10 and compared with the CPU reference's steps
# 11-20: GPU -> CPU (the CPU continues under the GPU's plan, as the checkpoint's options say), and
# CPU -> GPU (the CPU's first half runs here: a few seconds of d2 or bert-tiny).
resume_cross() {
  local fails=0 name ref tol args gpu dir
  mkdir -p "$WORK/resume"
  while IFS='|' read -r name ref tol args gpu; do
    [[ $name =~ ^(gpt2-fp32-adamw|gpt2-bf16-adamw|bert-bf16-unpadded-adamw)$ ]] || continue
    dir="$WORK/resume/$name"
    echo "--- $name: GPU to step 10, then the CPU"
    if gpu_train "$args" "" "$dir-gpu" "--save-every 10" "$dir-gpu.log" &&
      eval "ours \"\$BIN/mptrain\" $args --device cpu --resume '$dir-gpu/step_00000010' --run-dir '$dir-cpu'" \
        >"$dir-cpu.log" 2>&1; then
      "$python" scripts/gpu/compare_runs.py compare "$REFS/$ref.json" "$dir-cpu" --tol "$tol" --first-step 11 ||
        ((fails++))
    else
      tail -15 "$dir-gpu.log" "$dir-cpu.log" 2>/dev/null
      ((fails++))
    fi
    echo "--- $name: the CPU (the GPU's plan) to step 10, then the GPU"
    if eval "ours \"\$BIN/mptrain\" $args --device cpu --policy-of cuda --save-every 10 --run-dir '$dir-cpu0'" \
      >"$dir-cpu0.log" 2>&1 &&
      gpu_train "$args" "" "$dir-gpu1" "--resume '$dir-cpu0/step_00000010'" "$dir-gpu1.log"; then
      "$python" scripts/gpu/compare_runs.py compare "$REFS/$ref.json" "$dir-gpu1" --tol "$tol" --first-step 11 ||
        ((fails++))
    else
      tail -15 "$dir-cpu0.log" "$dir-gpu1.log" 2>/dev/null
      ((fails++))
    fi
  done < <(matrix_rows)
  echo "[jobs] resume across devices: $fails missed"
  ((fails == 0))
}

commands() {
  local dir="$WORK/commands" fails=0 m=("$BIN/mptrain")
  mkdir -p "$dir"
  eval "ours \"\${m[@]}\" $(gpt2_args d2 | sed 's/--steps 20/--steps 2/') --device cpu --run-dir '$dir/gpt2'" \
    >"$dir/gpt2_train.log" 2>&1 || { tail -5 "$dir/gpt2_train.log"; return 1; }
  eval "ours \"\${m[@]}\" $(bert_args unpadded | sed 's/--steps 20/--steps 2/') --device cpu --run-dir '$dir/bert'" \
    >"$dir/bert_train.log" 2>&1 || { tail -5 "$dir/bert_train.log"; return 1; }
  local ev=(eval --checkpoint "$dir/gpt2" --data "$DATA/gpt2/val_*.bin" --batch 2 --seq 32 --steps 4 --precision bf16)
  local gpu cpu
  gpu=$(ours "${m[@]}" "${ev[@]}" --device cuda 2>&1 | tee /dev/stderr | sed -n 's/^loss \([0-9.]*\) .*/\1/p')
  cpu=$(ours "${m[@]}" "${ev[@]}" --device cpu --policy-of cuda 2>&1 | sed -n 's/^loss \([0-9.]*\) .*/\1/p')
  echo "--- eval loss: cuda ${gpu:-none}, the GPU's plan on the CPU ${cpu:-none}"
  "$python" -c "import sys; g, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(g - c) > 0.02 * c)" \
    "${gpu:-nan}" "${cpu:-nan}" || { echo "  MISS: eval's losses differ by more than 2%"; ((fails++)); }
  echo "--- generate --device cuda"
  ours "${m[@]}" generate --checkpoint "$dir/gpt2" --prompt 'The' --max-new-tokens 8 --precision bf16 \
    --vocab-dir .gpu/vocab --device cuda || ((fails++))
  echo "--- BERT eval and fill-mask --device cuda"
  ours "${m[@]}" eval --checkpoint "$dir/bert" --data "$DATA/bert/b_val.bert" --batch 8 --steps 2 --precision bf16 \
    --device cuda || ((fails++))
  ours "${m[@]}" fill-mask --checkpoint "$dir/bert" --precision bf16 --device cuda 'the [MASK] of the system' ||
    ((fails++))
  echo "--- BERT fine-tuned for classification (train --task classify), eval and predict --device cuda"
  classify "$dir" || ((fails++))
  echo "[jobs] commands on the GPU: $fails missed"
  ((fails == 0))
}

# A 3-class task (which word a line holds) fine-tuned from the commands job's BERT checkpoint, on the
# GPU and with the GPU's plan on the CPU: the final validation losses within 5%; then eval and predict
# of the best weights on the GPU.
classify() {
  local dir=$1 m=("$BIN/mptrain") words=(computer program system) i
  {
    printf 'sentence\tlabel\n'
    for i in $(seq 0 95); do printf 'the %s is a %s of it\t%d\n' "${words[i % 3]}" "${words[(i / 3) % 3]}" $((i % 3)); done
  } >"$dir/cls.tsv"
  local args=(train --task classify --init-from "$dir/bert" --data "$dir/cls.tsv" --val-data "$dir/cls.tsv"
    --num-labels 3 --batch 8 --seq 32 --steps 6 --lr 1e-3 --precision bf16 --progress none)
  local gpu cpu
  gpu=$(ours "${m[@]}" "${args[@]}" --device cuda --run-dir "$dir/cls-gpu" 2>&1 | tee /dev/stderr |
    sed -n 's/^done: .*val loss \([0-9.]*\).*/\1/p')
  cpu=$(ours "${m[@]}" "${args[@]}" --device cpu --policy-of cuda --run-dir "$dir/cls-cpu" 2>&1 |
    sed -n 's/^done: .*val loss \([0-9.]*\).*/\1/p')
  echo "--- classify val loss: cuda ${gpu:-none}, the GPU's plan on the CPU ${cpu:-none}"
  "$python" -c "import sys; g, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(g - c) > 0.05 * c)" \
    "${gpu:-nan}" "${cpu:-nan}" || { echo "  MISS: the classifier's losses differ by more than 5%"; return 1; }
  ours "${m[@]}" eval --checkpoint "$dir/cls-gpu/best" --data "$dir/cls.tsv" --seq 32 --device cuda || return 1
  ours "${m[@]}" predict --checkpoint "$dir/cls-gpu/best" --data "$dir/cls.tsv" --label-column label --seq 32 \
    --device cuda -o "$dir/predictions.tsv" || return 1
}

ladder() {
  ours "$BIN/mptrain" bench --device cuda --ladder --preset gpt2 --batch 16 --seq 1024 --steps 10 --warmup 3 \
    --rounds 1 --python "$(peer_python)" --progress none
}

# Where GPT-2 124M's bf16 step goes on the GPU, op by op (each op waited for: bench --profile).
profile() {
  ours "$BIN/mptrain" bench --device cuda --preset gpt2 --batch 16 --seq 1024 --precision bf16 --steps 5 \
    --warmup 2 --profile --progress none
}

# GPT-2 124M at batch B (64: 4x the ladder's, its logits 4.1e9 elements, past 2^31), the best rung
# (bf16, flash, padded vocabulary, graphs) against the PyTorch peer on the same batch.
peer_profile() {
  "$python" bench/pytorch_gpt2_cuda.py --preset gpt2 --batch 16 --seq 1024 --steps 5 --warmup 3 --precision bf16 \
    --attn flash --compile --vocab 50304 --profile 3
}

gpt2_bench() {
  ours "$BIN/mptrain" bench --device cuda --preset gpt2 --batch "$1" --seq 1024 --precision bf16 --graphs \
    --steps 10 --warmup 3 --python "$(peer_python)" --progress none
}

# compute-sanitizer's racecheck (shared-memory hazards) on the suites of the kernels that share
# memory across a block's threads: attention (flash too), LayerNorm, cross-entropy, the optimizers.
racecheck() {
  ours compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 3 "$BIN/mptrain_tests_cuda" \
    --gtest_brief=1 --gtest_filter="$1"
}

# Nsight Compute on our own kernels of the bf16 GPT-2 124M step that take longest (bench --profile:
# attention's backward and forward, LayerNorm's backward; the GEMMs are cuBLASLt's): one launch of
# each, one ncu run per kernel (--launch-count counts every match: one regex for all four gave four
# launches of the first kernel to run, flash_fwd_kernel, on 2026-11-28).
ncu_kernels() {
  local n k fails=0
  n=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  [[ -n $n ]] || { echo "no ncu on this machine"; return 1; }
  for k in flash_bwd_dkdv_kernel flash_bwd_dq_kernel flash_fwd_kernel layernorm_backward_warp_kernel; do
    ours "$n" --clock-control none --launch-count 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section MemoryWorkloadAnalysis --kernel-name "regex:$k" \
      "$BIN/mptrain" bench --device cuda --preset gpt2 --batch 16 --seq 1024 --precision bf16 --steps 1 \
      --warmup 1 --no-peer --progress none || ((fails++))
  done
  ((fails == 0))
}

ncu_stalls() {
  local n
  n=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  [[ -n $n ]] || { echo "no ncu on this machine"; return 1; }
  ours "$n" --clock-control none --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
    --kernel-name "regex:$1" "$BIN/mptrain" bench --device cuda --preset gpt2 --batch 16 --seq 1024 \
    --precision bf16 --steps 1 --warmup 1 --no-peer --progress none
}

# The folder of PyTorch's own cuBLASLt (its pip package), when it is not the toolkit's.
torch_cublas_dir() {
  local site
  site=$("$python" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  find $site -path '*/nvidia/*' -name 'libcublasLt.so*' -printf '%h\n' 2>/dev/null | sort -u | head -1
}

gemm_sweep() {
  ours "$BIN/bench_cuda_gemm" 16384 16 10 || return 1
  local dir
  dir=$(torch_cublas_dir)
  [[ -n $dir ]] || { echo "--- no pip cuBLASLt beside PyTorch"; return 0; }
  echo "--- with PyTorch's cuBLASLt first on the path ($dir)"
  env LD_LIBRARY_PATH="$dir:$MPTRAIN_GPU_LD" "$BIN/bench_cuda_gemm" 16384 16 10
}

gpt2_lib_ab() {
  local dir round
  dir=$(torch_cublas_dir)
  [[ -n $dir ]] || { echo "no pip cuBLASLt beside PyTorch"; return 1; }
  local args=(bench --device cuda --preset gpt2 --batch 16 --seq 1024 --precision bf16 --graphs --steps 10
    --warmup 3 --no-peer --progress none)
  for round in 1 2; do
    echo "--- round $round: the toolkit's cuBLASLt"
    ours "$BIN/mptrain" "${args[@]}" | grep -E 'ms/step' || return 1
    echo "--- round $round: PyTorch's cuBLASLt ($dir)"
    env LD_LIBRARY_PATH="$dir:$MPTRAIN_GPU_LD" "$BIN/mptrain" "${args[@]}" | grep -E 'ms/step' || return 1
  done
}

nsys_kernels() {
  local n
  n=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
  [[ -n $n ]] || { echo "no nsys on this machine"; return 1; }
  ours "$n" profile -t cuda -o "$WORK/step" --force-overwrite true "$BIN/mptrain" bench --device cuda \
    --preset gpt2 --batch 16 --seq 1024 --precision bf16 --graphs --steps 3 --warmup 2 --no-peer --progress none ||
    return 1
  "$n" stats -q -r cuda_gpu_kern_sum -f csv -o "$WORK/kern" "$WORK/step.nsys-rep" >/dev/null || return 1
  # Name, calls and total time of each kernel over the profiled run (5 steps and the set-up), top 40.
  "$python" - "$WORK"/kern*.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tot = sum(float(r["Total Time (ns)"]) for r in rows)
print(f"{'ms':>9} {'share':>6} {'calls':>6}  kernel (all profiled launches; the run's 5 steps and set-up)")
for r in rows[:40]:
    t = float(r["Total Time (ns)"])
    print(f"{t / 1e6:>9.2f} {100 * t / tot:>5.1f}% {r['Instances']:>6}  {r['Name'][:120]}")
PY
}

bert_bench() {
  ours "$BIN/mptrain" bench --device cuda --model bert --preset bert-base --precision bf16 --batch 32 --seq 128 \
    --steps 10 --warmup 3 --python "$(peer_python)" --progress none
}

memcheck() {
  ours compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN/mptrain_tests_cuda" --gtest_brief=1 \
    --gtest_filter='Conformance*:PackedSequences*'
}

case "${1:-}" in
  gtest) gtest "$2" ;;
  suites) suites ;;
  train) train "$2" ;;
  resume-cross) resume_cross ;;
  commands) commands ;;
  ladder) ladder ;;
  bert-bench) bert_bench ;;
  profile) profile ;;
  peer-profile) peer_profile ;;
  gpt2-bench) gpt2_bench "$2" ;;
  racecheck) racecheck "$2" ;;
  ncu) ncu_kernels ;;
  ncu-stalls) ncu_stalls "$2" ;;
  gemm-sweep) gemm_sweep ;;
  gpt2-lib-ab) gpt2_lib_ab ;;
  nsys-kernels) nsys_kernels ;;
  memcheck) memcheck ;;
  *) echo "jobs.sh: unknown job '${1:-}' (gtest suites train resume-cross commands ladder bert-bench profile peer-profile gpt2-bench racecheck ncu ncu-stalls gemm-sweep gpt2-lib-ab nsys-kernels memcheck)"; exit 2 ;;
esac
