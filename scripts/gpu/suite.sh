#!/usr/bin/env bash
# One gtest suite of a packed test binary in a process of its own (scripts/gpu/run.sh suites):
# a kernel fault that poisons a CUDA context, an abort or a hang then costs that suite alone.
#   scripts/gpu/suite.sh BINARY SUITE LOGDIR TIMEOUT_S
# Appends "exit-status suite" to LOGDIR/status; the suite's output goes to LOGDIR/<suite>.log.
set -uo pipefail
bin=$1 suite=$2 dir=$3 limit=$4
log="$dir/$(echo "$suite" | tr '/' '_').log"
timeout -k 10 "$limit" "$bin" --gtest_filter="${suite}*" >"$log" 2>&1
echo "$? $suite" >>"$dir/status"
