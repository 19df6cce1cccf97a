#!/usr/bin/env bash
# The GPU check in one command, for a lent GPU machine's 15 minutes (start-up included, at most 10
# a command): a fixed plan (scripts/gpu/plan.txt) that ends by its own deadline and returns what
# finished even when the command is cut short. What it runs travels in .gpu/ (scripts/gpu/pack.sh,
# run here first, on a machine without a GPU); docs/dev/cuda.md, "Running on a GPU machine".
#
#   scripts/gpu/run.sh                  the plan, ending by MPTRAIN_GPU_DEADLINE_S (default 540)
#   scripts/gpu/run.sh --plan           the jobs, their budgets, their order and the total; no GPU
#   scripts/gpu/run.sh --only REGEX     only the jobs whose names match (a rerun of what failed)
#   scripts/gpu/run.sh --plan-file F    another plan (tests/scripts/test_gpu_plan.sh runs stubs)
#
# A plan line is `phase | name | budget_s | log | command`. Phases, in this order:
#   parallel  every job at once, each under its own budget (the GPU's own tests and comparisons)
#   alone     one after another, the GPU to themselves (the speed measurements)
#   rest      one after another, with the time left (the sanitizer)
# A job that fails, crashes or hangs costs itself alone: it is killed (with whatever it started) at
# its budget or at the deadline, whichever comes first, and the next runs.
#
# What comes back ($OUT, default /tmp/mptrain-gpu-out; the device tool returns at most 8 files, 2
# folders deep, named [A-Za-z0-9._-]): device.txt (date, GPU, driver, commit), summary.txt (a line
# per job as it ends: name, pass/fail/timeout/skipped, seconds, exit status), and each job's log
# appended under a header, as the job ends, to $OUT/<log>.log (a few shared files: conformance,
# train, suites, speed, sanitize). So a command cut short still returns every job it finished.
# Exit status: 0 when every job passed, 1 otherwise, 2 on a bad plan or a missing .gpu/.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

plan_file=scripts/gpu/plan.txt
only=""
print_plan=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --plan) print_plan=1 ;;
    --only) only=$2; shift ;;
    --plan-file) plan_file=$2; shift ;;
    *) echo "run.sh: unknown argument '$1' (--plan, --only REGEX, --plan-file F)"; exit 2 ;;
  esac
  shift
done
deadline_s=${MPTRAIN_GPU_DEADLINE_S:-540}
[[ -f "$plan_file" ]] || { echo "run.sh: no plan file $plan_file"; exit 2; }

# --- the plan: phase, name, budget, log and command of each job, in file order ---
phases=() names=() budgets=() logs=() cmds=()
trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; printf '%s' "${s%"${s##*[![:space:]]}"}"; }
while IFS= read -r line || [[ -n $line ]]; do
  [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
  IFS='|' read -r phase name budget log cmd <<<"$line"
  phase=$(trim "$phase") name=$(trim "$name") budget=$(trim "$budget") log=$(trim "$log") cmd=$(trim "$cmd")
  if [[ ! $phase =~ ^(parallel|alone|rest)$ || ! $name =~ ^[A-Za-z0-9._-]+$ || ! $budget =~ ^[0-9]+$ ||
        ! $log =~ ^[A-Za-z0-9_-]+$ || -z $cmd ]]; then
    echo "run.sh: bad plan line in $plan_file: $line"
    exit 2
  fi
  [[ -n $only && ! $name =~ $only ]] && continue
  phases+=("$phase") names+=("$name") budgets+=("$budget") logs+=("$log") cmds+=("$cmd")
done <"$plan_file"

# The plan's length: the parallel phase counts once, at its longest budget.
plan_total() {
  local par=0 seq=0 i
  for i in "${!names[@]}"; do
    if [[ ${phases[$i]} == parallel ]]; then ((budgets[i] > par)) && par=${budgets[$i]}; else ((seq += budgets[i])); fi
  done
  echo $((par + seq))
}

if ((print_plan)); then
  printf '%-9s %-26s %8s  %-12s %s\n' phase job budget log command
  for i in "${!names[@]}"; do
    printf '%-9s %-26s %7ss  %-12s %s\n' "${phases[$i]}" "${names[$i]}" "${budgets[$i]}" "${logs[$i]}" "${cmds[$i]}"
  done
  echo "the parallel jobs start together (the phase lasts as long as its longest budget); then the alone jobs, then the rest, one at a time"
  echo "not in the plan: --graphs for BERT (CUDA graphs capture GPT-2's pass only; BERT's rows run without them), two-GPU runs (one GPU is lent)"
  echo "total $(plan_total) s (deadline ${deadline_s} s)"
  exit 0
fi

out=${OUT:-/tmp/mptrain-gpu-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/mptrain-gpu-run.XXXXXX)
start=$(date +%s)
deadline=$((start + deadline_s))

# The packed binaries and their libraries (pack.sh), and what the jobs share. A stub plan (the CI
# test) needs none of it.
if [[ -d .gpu/bin ]]; then
  if [[ -f .gpu/libs.tar.xz ]]; then
    mkdir -p "$work/libs" && tar -C "$work/libs" -xJf .gpu/libs.tar.xz
  fi
  # CUDA's libraries: the toolkit's, then those of PyTorch's pip packages (NCCL is only there,
  # nvidia-nccl-cu13; their folders moved between releases, so they are found by file name).
  cuda_lib=$(ls -d /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda/lib 2>/dev/null | paste -sd:)
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  pip_lib=$(find $site -path '*/nvidia/*' \( -name 'libnccl.so*' -o -name 'libcublasLt.so*' -o -name 'libcudart.so*' \) \
    -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
  export MPTRAIN_GPU_LD="$work/libs/lib:${cuda_lib}:${pip_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # A library still missing is looked for anywhere on the machine once, before any job runs.
  for lib in $(LD_LIBRARY_PATH="$MPTRAIN_GPU_LD" ldd .gpu/bin/* 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
    found=$(find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -1)
    echo "run.sh: $lib was not on the library path; found: ${found:-nowhere}"
    [[ -n $found ]] && MPTRAIN_GPU_LD="$MPTRAIN_GPU_LD:$(dirname "$found")"
  done
  export BIN="$root/.gpu/bin" REFS="$root/.gpu/refs" DATA="$root/.gpu/data"
  # The tests that run mptrain as a subprocess take it from here, and their text from the packed
  # fortunes (tests/common/test_util.h).
  export MPTRAIN_TEST_BINARY="$BIN/mptrain" MPTRAIN_TEST_FORTUNES_DIR="$root/.gpu/fortunes"
elif [[ $plan_file == scripts/gpu/plan.txt ]]; then
  echo "run.sh: no .gpu/ (run scripts/gpu/pack.sh on the build machine and carry .gpu)"
  exit 2
fi
export PATH="/usr/local/cuda/bin:$PATH" OUT="$out" WORK="$work"
# This run's files only (a reused $OUT keeps nothing of an earlier run).
rm -f "$out/summary.txt" "$out/device.txt"
for l in "${logs[@]}"; do rm -f "$out/$l.log"; done
# A dozen processes share the machine's cores in the parallel phase: two threads each.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  grep -m1 'model name' /proc/cpuinfo
  cat .gpu/commit.txt 2>/dev/null || git log -1 --format='commit %h %s' 2>/dev/null || echo "commit unknown"
  echo "plan $plan_file: ${#names[@]} jobs, total $(plan_total) s, deadline ${deadline_s} s"
  if [[ -d .gpu/bin ]]; then
    echo "library path: ${MPTRAIN_GPU_LD:-}"
    LD_LIBRARY_PATH="${MPTRAIN_GPU_LD:-}" ldd .gpu/bin/mptrain | grep -E 'not found|cuda|cublas|nccl' || true
  fi
} >"$out/device.txt"
cat "$out/device.txt"

# Appends one finished job's log under its header to $OUT/<log>.log, and its line to summary.txt,
# each under a lock: jobs of the parallel phase end at any time.
record() {
  local name=$1 log=$2 status=$3 secs=$4 rc=$5
  local line
  line=$(printf '%-26s %-8s %5s s  exit %s' "$name" "$status" "$secs" "$rc")
  (
    flock 9
    { echo "===== $line"; cat "$work/$name.log" 2>/dev/null; echo; } >>"$out/$log.log"
    echo "$line" >>"$out/summary.txt"
  ) 9>"$work/lock"
  echo "== $line"
}

# Runs one job under min(budget, time to the deadline); skipped when under 5 s are left.
run_job() {
  local i=$1
  local name=${names[$i]} budget=${budgets[$i]} log=${logs[$i]} cmd=${cmds[$i]}
  local now left limit t0 rc status
  now=$(date +%s)
  left=$((deadline - now - 2))
  if ((left < 5)); then
    echo "skipped: the plan's deadline came first" >"$work/$name.log"
    record "$name" "$log" skipped 0 -
    return
  fi
  limit=$((budget < left ? budget : left))
  t0=$(date +%s)
  # timeout signals the job's whole process group (what it started, too); -k: KILL 3 s later.
  timeout -k 3 "$limit" bash -c "$cmd" >"$work/$name.log" 2>&1 </dev/null
  rc=$?
  if ((rc == 0)); then
    status=pass
  elif ((rc == 124 || rc == 137)); then
    status=timeout
    echo "[run.sh] killed after its ${limit} s (budget ${budget} s)" >>"$work/$name.log"
  else
    status=fail
  fi
  record "$name" "$log" "$status" "$(($(date +%s) - t0))" "$rc"
}

for phase in parallel alone rest; do
  pids=()
  for i in "${!names[@]}"; do
    [[ ${phases[$i]} == "$phase" ]] || continue
    if [[ $phase == parallel ]]; then
      run_job "$i" &
      pids+=($!)
    else
      run_job "$i"
    fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
done

echo
echo "===== summary ($(($(date +%s) - start)) s of ${deadline_s})"
cat "$out/summary.txt"
rm -rf "$work"
! grep -qvE '^[^ ]+ +pass ' "$out/summary.txt"
