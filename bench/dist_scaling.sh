#!/usr/bin/env bash
# Data-parallel scaling on CPU ranks: tokens/s of `mptrain train` on 1 rank and on 2 ranks
# under mpirun (one OpenMP thread per rank), and the scaling efficiency
#   efficiency = tokens/s with 2 ranks / (2 x tokens/s with 1 rank).
# Runs (random token ids, so only the timing means anything):
#   1 rank            B x T tokens per step, alone;
#   2 x 1 rank        two independent single-process runs at the same time: what this machine
#                     gives two processes at once (the two vCPUs of a shared virtual machine
#                     need not double one's throughput) — the ceiling for 2 ranks;
#   2 ranks (weak)    the same micro-batch per rank: 2 x B x T tokens per step;
#   1 rank (strong)   2 x B x T tokens per step, accumulating 2 micro-batches ...
#   2 ranks (strong)  ... and the same global batch on 2 ranks, one micro-batch each.
# "vs ceiling" = 2-rank tokens/s / the two independent runs' tokens/s summed: the cost of the
# gradient all-reduce and of waiting for the slower rank, apart from the machine's own limit.
# tokens/s and ms/step are medians over the timed steps of metrics.jsonl (the first WARMUP
# steps dropped; global figures from rank 0); "comm ms" is rank 0's median time per step in
# the gradient collectives (transfer plus waiting for the other rank). The runs are repeated
# REPEATS times in turn (one of each, then again: drift hits every row alike) and each row keeps
# its median repetition (by tokens/s). The quietness line says how loaded the machine was: the
# load average before, and the CPU time other processes took during the runs (/proc/stat's busy
# time minus the CPU time of this script's children, per second: cores); above 0.1 cores the
# efficiencies are flagged as not reliable.
#
# usage: bench/dist_scaling.sh [path/to/mptrain]
#   env: PRESET (d4), B (4), T (128), STEPS (12), WARMUP (2), REPEATS (3), ZERO (0: the 2-rank runs'
#        --zero), MPIRUN_ARGS (extra mpirun arguments),
#        NICE (e.g. -20 as root: run ahead of other work on a shared machine)
set -euo pipefail
cd "$(dirname "$0")/.."
MPTRAIN=$(realpath "${1:-build/mptrain}")
PRESET=${PRESET:-d4}
B=${B:-4}
T=${T:-128}
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-2}
REPEATS=${REPEATS:-3}
ZERO=${ZERO:-0}
PY=/usr/bin/python3

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One shard of 2M random token ids (llm.c format: 256 int32 header, then uint16 tokens).
"$PY" - "$work/train_000000.bin" <<'EOF'
import struct, sys, random
n = 2_000_000
rng = random.Random(1)
header = [20240520, 1, n] + [0] * 253
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack("<%dH" % n, *(rng.randrange(50257) for _ in range(n))))
EOF

MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none
        ${MPIRUN_ARGS:-})
PRIO=()
[ -n "${NICE:-}" ] && PRIO=(nice -n "$NICE")

# launch RANKS TOTAL_BATCH NAME: one training run (in the foreground).
launch() {
  local ranks=$1 total=$2 name=$3
  local args=(train --preset "$PRESET" --train-data "$work/train_*.bin" --batch "$B" --seq "$T"
              --total-batch "$total" --steps "$STEPS" --warmup 0 --threads 1 --log-every 1000
              --sample-every 0 --sample-tokens 1 --run-dir "$work/$name")
  if [ "$ranks" = 1 ]; then
    OMP_NUM_THREADS=1 "${PRIO[@]}" "$MPTRAIN" "${args[@]}" > "$work/$name.log" 2>&1
  else
    "${PRIO[@]}" "${MPIRUN[@]}" -np "$ranks" -x OMP_NUM_THREADS=1 "$MPTRAIN" "${args[@]}" --zero "$ZERO" \
      > "$work/$name.log" 2>&1
  fi
}

# medians NAME: "tokens/s ms/step comm_ms" of a finished run.
medians() {
  "$PY" - "$work/$1/metrics.jsonl" "$WARMUP" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
med = lambda k: statistics.median(r.get(k, 0.0) for r in rows)
print("%.1f %.1f %.1f" % (med("tokens_per_s"), med("ms"), med("comm_ms")))
EOF
}

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f%%", 100 * a / b }'; }

micro=$((B * T))
echo "dist scaling: preset $PRESET, micro-batch $B x $T, $STEPS steps ($WARMUP untimed), 1 thread per rank, median of $REPEATS, 2-rank runs with --zero $ZERO"
echo "machine: $(nproc) cores${NICE:+, benchmark at nice $NICE}"

# Quietness: busy and steal seconds of the whole machine (/proc/stat), our children's CPU seconds
# (bash's `times`: the runs and everything they waited for), and the wall clock. `times` runs in
# this shell (a command substitution's subshell would report its own, empty, children).
tick=$(getconf CLK_TCK)
busy_s() { awk -v t="$tick" '/^cpu / { printf "%.2f %.2f", ($2 + $3 + $4 + $7 + $8) / t, $9 / t }' /proc/stat; }
record_children() { times > "$work/times.txt"; }
children_s() { tail -1 "$work/times.txt" | awk '{ s = 0; for (i = 1; i <= 2; ++i) { split($i, p, /[ms]/); s += 60 * p[1] + p[2] } printf "%.2f", s }'; }
load_before=$(cut -d' ' -f1 /proc/loadavg)
read -r busy0 steal0 <<< "$(busy_s)"
record_children
own0=$(children_s)
wall0=$(date +%s.%N)

# results ROW: every repetition's "tokens/s ms/step comm_ms", one per line, in $work/ROW.results;
# median ROW: the repetition with the median tokens/s.
median() { sort -g -k1,1 "$work/$1.results" | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }'; }
for rep in $(seq "$REPEATS"); do
  launch 1 "$micro" one && medians one >> "$work/one.results"
  launch 1 "$micro" pair_a & launch 1 "$micro" pair_b; wait
  # the pair's throughput is the sum of both runs
  paste -d' ' <(medians pair_a) <(medians pair_b) | awk '{ print $1 + $4, ($2 + $5) / 2, 0 }' >> "$work/pair.results"
  launch 2 $((2 * micro)) weak && medians weak >> "$work/weak.results"
  launch 1 $((2 * micro)) strong1 && medians strong1 >> "$work/strong1.results"
  launch 2 $((2 * micro)) strong2 && medians strong2 >> "$work/strong2.results"
done
read -r one one_ms _ <<< "$(median one)"
read -r pair pa_ms _ <<< "$(median pair)"
read -r weak weak_ms weak_comm <<< "$(median weak)"
read -r s1 s1_ms _ <<< "$(median strong1)"
read -r s2 s2_ms s2_comm <<< "$(median strong2)"

row() { printf "%-34s %10s %9s %8s %11s %11s\n" "$@"; }
row "run" "tokens/s" "ms/step" "comm ms" "efficiency" "vs ceiling"
row "1 rank, $micro tokens/step" "$one" "$one_ms" "-" "-" "-"
row "2 x 1 rank at once (ceiling)" "$pair" "$pa_ms" "-" "$(pct "$pair" "$(awk -v a="$one" 'BEGIN{print 2*a}')")" "-"
row "2 ranks, $((2 * micro)) tokens/step (weak)" "$weak" "$weak_ms" "$weak_comm" \
  "$(pct "$weak" "$(awk -v a="$one" 'BEGIN{print 2*a}')")" "$(pct "$weak" "$pair")"
row "1 rank, 2 x $micro accumulated" "$s1" "$s1_ms" "-" "-" "-"
row "2 ranks, $micro each (strong)" "$s2" "$s2_ms" "$s2_comm" \
  "$(pct "$s2" "$(awk -v a="$s1" 'BEGIN{print 2*a}')")" "$(pct "$s2" "$pair")"
read -r busy1 steal1 <<< "$(busy_s)"
record_children
own1=$(children_s)
awk -v l="$load_before" -v b="$busy0" -v B="$busy1" -v s="$steal0" -v S="$steal1" -v o="$own0" -v O="$own1" \
    -v w="$wall0" -v W="$(date +%s.%N)" 'BEGIN {
  wall = W - w; others = ((B - b) - (O - o)) / wall; if (others < 0) others = 0; steal = (S - s) / wall
  printf "quietness: load average %.2f before; during the %.0f s run others used %.2f cores (steal %.2f)\n", l, wall, others, steal
  if (others > 0.1 || steal > 0.1) printf "warning: machine busy (others used %.2f cores): efficiencies not reliable\n", others
}'
