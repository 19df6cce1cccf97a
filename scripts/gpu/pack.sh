#!/usr/bin/env bash
# Builds the GPU binaries HERE (a machine with the CUDA toolkit and the project's dependencies but
# no GPU) and packs them for a lent GPU machine (docs/dev/cuda.md, "Running on a GPU machine").
# That machine has CUDA, cuBLASLt, NCCL (pip's nvidia-nccl-cu13) and PyTorch, but not oneDNN,
# OpenMPI, ICU, PCRE2 or GoogleTest, and it cannot install anything; so the binaries travel with
# the shared libraries they need that are not CUDA's or the C library's, in .gpu/ (ignored by git,
# listed in .git/info/exclude), which the device tool's `carry` takes along:
#   .gpu/bin/{mptrain,mptrain_tests_cuda,mptrain_tests_dist,bench_cuda_ops}   .gpu/libs.tar.xz
#   .gpu/fortunes/computers (the BERT GPU training test's text: the image has no fortunes)
# Then, there: scripts/gpu/run.sh.
#
#   scripts/gpu/pack.sh [BUILD_DIR]        (default build-gpu; MPTRAIN_GPU_ARCH, default 90)
#   MPTRAIN_GPU_SKIP_BUILD=1 scripts/gpu/pack.sh build-cuda   (pack an existing build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
arch=${MPTRAIN_GPU_ARCH:-90}
targets=(mptrain mptrain_tests_cuda mptrain_tests_dist bench_cuda_ops)

if [[ "${MPTRAIN_GPU_SKIP_BUILD:-0}" != 1 ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPTRAIN_CUDA=ON -DMPTRAIN_CUDA_ARCHITECTURES="$arch" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
fi

grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
rm -rf .gpu  # nothing in it outlives a pack (older layouts left binaries at its top)
mkdir -p .gpu/bin .gpu/lib .gpu/fortunes
cp /usr/share/games/fortunes/computers .gpu/fortunes/ 2>/dev/null ||
  echo "pack.sh: no /usr/share/games/fortunes/computers (scripts/setup.sh installs it): TrainBertDeviceGpu will skip" >&2
for t in "${targets[@]}"; do
  [[ -x "$build/$t" ]] || { echo "pack.sh: $build/$t was not built" >&2; exit 1; }
  cp "$build/$t" .gpu/bin/
done

# Every library the binaries resolve here, except the C runtime (the device image has its own,
# newer) and CUDA's (the device's toolkit and driver must be the ones that run the code).
skip='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvrtc|libnvJitLink|libcudnn)\.'
ldd .gpu/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ "$name" =~ $skip ]] && continue
  cp -L "$lib" .gpu/lib/
done
tar -C .gpu -cJf .gpu/libs.tar.xz lib
rm -rf .gpu/lib
du -sh .gpu/bin/* .gpu/libs.tar.xz
echo "packed: carry .gpu (and run scripts/gpu/run.sh there)"
