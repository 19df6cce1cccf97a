#!/usr/bin/env bash
# The whole test suite from nothing: installs dependencies, builds, runs every ctest test.
# GPU tests report themselves as skipped where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 "$@"
