#!/usr/bin/env bash
# scripts/gpu/run.sh's runner on stub jobs, without a GPU (CI): one passes, one fails, one
# segfaults, one hangs (and leaves a child behind), then an `alone` job, then `rest` jobs that
# the deadline cuts short and skips. Every job's line reaches summary.txt, the hang is killed at
# its budget with what it started, the script exits by its deadline, its logs come back under a
# header per job in at most 8 files of the names the device tool returns; and the real plan fits
# the GPU window (`--plan` totals <= 540 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
fails=0
check() {  # CONDITION-STATUS MESSAGE
  if [[ $1 != 0 ]]; then echo "FAIL: $2"; fails=$((fails + 1)); else echo "ok: $2"; fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; pkill -f mptrain-stub-orphan 2>/dev/null' EXIT
marker="mptrain-stub-orphan-$$"
cat >"$tmp/plan.txt" <<PLAN
# stubs
parallel | stub-pass   | 10  | stubs-a | echo stub says hello
parallel | stub-fail   | 10  | stubs-a | echo stub fails; exit 3
parallel | stub-segv   | 10  | stubs-b | kill -SEGV \$\$
parallel | stub-hang   | 3   | stubs-b | (exec -a $marker sleep 1000) & sleep 1000
alone    | stub-after  | 10  | stubs-c | echo after the parallel phase
rest     | stub-late   | 100 | stubs-c | sleep 1000
rest     | stub-never  | 10  | stubs-c | echo never
PLAN

t0=$(date +%s)
OUT="$tmp/out" MPTRAIN_GPU_DEADLINE_S=14 scripts/gpu/run.sh --plan-file "$tmp/plan.txt" >"$tmp/stdout" 2>&1
rc=$?
wall=$(($(date +%s) - t0))
cat "$tmp/stdout"
check $((rc != 1)) "exit status 1 when jobs failed (got $rc)"
check $((wall > 14 + 4)) "ended by its deadline: $wall s for a 14 s deadline"

summary="$tmp/out/summary.txt"
status_of() { awk -v n="$1" '$1 == n {print $2}' "$summary"; }
secs_of() { awk -v n="$1" '$1 == n {print $3}' "$summary"; }
check $(($(wc -l <"$summary") != 7)) "a summary line for each of the 7 jobs"
check $([[ $(status_of stub-pass) == pass ]]; echo $?) "stub-pass passed"
check $([[ $(status_of stub-fail) == fail ]] && grep -q 'stub-fail .* exit 3$' "$summary"; echo $?) "stub-fail failed with its status"
check $([[ $(status_of stub-segv) == fail ]] && grep -q 'stub-segv .* exit 139$' "$summary"; echo $?) "stub-segv failed (SIGSEGV, 139)"
check $([[ $(status_of stub-hang) == timeout ]]; echo $?) "stub-hang timed out"
check $(($(secs_of stub-hang) > 3 + 3 + 1)) "stub-hang killed at its 3 s budget (took $(secs_of stub-hang) s)"
sleep 1
check $(pgrep -f "$marker" >/dev/null && echo 1 || echo 0) "what stub-hang started was killed with it"
check $([[ $(status_of stub-after) == pass ]]; echo $?) "the alone phase ran after the failures"
check $([[ $(status_of stub-late) == timeout ]]; echo $?) "stub-late cut at the deadline"
check $([[ $(status_of stub-never) == skipped ]]; echo $?) "stub-never skipped: no time left"
check $(grep -q '^===== stub-pass .*pass' "$tmp/out/stubs-a.log" && grep -q 'stub says hello' "$tmp/out/stubs-a.log"; echo $?) "a job's log under its header"
check $(grep -q '^===== stub-hang .*timeout' "$tmp/out/stubs-b.log" && grep -q 'killed after its 3 s' "$tmp/out/stubs-b.log"; echo $?) "the hang's log says it was killed"
files=$(find "$tmp/out" -type f | wc -l)
check $((files > 8)) "at most 8 files come back ($files)"
check $(find "$tmp/out" -type f | xargs -n1 basename | grep -qvE '^[A-Za-z0-9._-]+$' && echo 1 || echo 0) "file names the device tool returns"

# A malformed plan is refused before anything runs.
printf 'parallel | bad name | 10 | x | true\n' >"$tmp/bad.txt"
OUT="$tmp/out2" scripts/gpu/run.sh --plan-file "$tmp/bad.txt" >/dev/null 2>&1
check $(($? != 2)) "a bad plan line exits 2"

# The real plan fits the window.
total=$(scripts/gpu/run.sh --plan | sed -n 's/^total \([0-9]*\) s.*/\1/p')
check $([[ -n $total && $total -le 540 ]]; echo $?) "scripts/gpu/run.sh --plan totals ${total:-?} s <= 540"
# Every job of the real plan names a job jobs.sh has.
bad=$(sed -n 's/^[^#].*| *scripts\/gpu\/jobs.sh \([a-z0-9-]*\).*/\1/p' scripts/gpu/plan.txt scripts/gpu/plan-deep.txt |
  grep -vxE 'gtest|suites|train|resume-cross|commands|ladder|bert-bench|profile|gpt2-bench|racecheck|ncu|memcheck')
check $([[ -z $bad ]]; echo $?) "every plan job is one of jobs.sh's${bad:+ (not: $bad)}"

# compare_runs.py: a run equals its own summary; a loss off by 1% at fp32's tolerance, a NaN
# tensor or a missing step is a miss.
fake_run() {  # DIR LOSS2 WEIGHT0 STEPS [TENSOR_NAME]
  /usr/bin/python3 - "$@" <<'PY'
import json, os, struct, sys
d, loss2, w0, steps = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
name = sys.argv[5] if len(sys.argv) > 5 else "w"
os.makedirs(f"{d}/step_00000002", exist_ok=True)
with open(f"{d}/metrics.jsonl", "w") as f:
    for s in range(1, steps + 1):
        f.write(json.dumps({"step": s, "train_loss": 5.0 if s == 1 else loss2, "grad_norm": 1.5}) + "\n")
data = struct.pack("<4f", w0, 2.0, 3.0, 4.0)
header = json.dumps({name: {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
with open(f"{d}/step_00000002/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + data)
PY
}
cmp_runs() { /usr/bin/python3 scripts/gpu/compare_runs.py compare "$tmp/ref.json" "$1" --tol 1e-4 >"$tmp/cmp.log" 2>&1; }
fake_run "$tmp/r0" 4.0 1.0 2 && /usr/bin/python3 scripts/gpu/compare_runs.py summarize "$tmp/r0" "$tmp/ref.json"
cmp_runs "$tmp/r0"
check $? "compare_runs: a run equals its own reference"
fake_run "$tmp/r1" 4.04 1.0 2
cmp_runs "$tmp/r1"
check $(($? != 1)) "compare_runs: a loss 1% off misses at 1e-4"
fake_run "$tmp/r2" 4.0 nan 2
cmp_runs "$tmp/r2"
check $(($? != 1)) "compare_runs: a NaN parameter misses"
fake_run "$tmp/r3" 4.0 1.0 1
cmp_runs "$tmp/r3"
check $(($? != 1)) "compare_runs: a missing step misses"
# A key bias (gradient zero in exact arithmetic: its values are rounding noise) is judged finite
# only: another norm passes, NaN misses.
key=bert.encoder.layer.0.attention.self.key.bias
fake_run "$tmp/k0" 4.0 1.0 2 "$key" && /usr/bin/python3 scripts/gpu/compare_runs.py summarize "$tmp/k0" "$tmp/ref.json"
fake_run "$tmp/k1" 4.0 9.0 2 "$key"
cmp_runs "$tmp/k1"
check $? "compare_runs: a key bias's norm is not judged"
fake_run "$tmp/k2" 4.0 nan 2 "$key"
cmp_runs "$tmp/k2"
check $(($? != 1)) "compare_runs: a NaN key bias misses"

echo "$fails failed"
((fails == 0))
