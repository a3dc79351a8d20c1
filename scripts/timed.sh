#!/usr/bin/env bash
# Runs a command and prints its wall time as "== phase NAME: N s" (make test's phases,
# so that a slow CI run says where its time went). Usage: timed.sh NAME COMMAND...
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
status=$?
echo "== phase $name: $(($(date +%s) - start)) s (exit $status)"
exit $status
