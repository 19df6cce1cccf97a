#!/usr/bin/env bash
# Configures and builds mptrain (Release) into ${BUILD_DIR:-build}. Extra arguments go to cmake.
# BUILD_TARGET=mptrain builds only the executable (what scripts/run.sh needs), not the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
