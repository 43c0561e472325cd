#!/usr/bin/env bash
# Usage: expect_failure.sh REGEX COMMAND...
# Passes when COMMAND exits non-zero (and not by a signal), prints one line matching REGEX on
# stderr, and does not crash.
set -u
regex=$1
shift
stderr_file=$(mktemp)
trap 'rm -f "$stderr_file"' EXIT
timeout 120 "$@" >/dev/null 2>"$stderr_file"
status=$?
if [ "$status" -eq 0 ]; then
  echo "expected a non-zero exit from: $*" >&2
  exit 1
fi
if [ "$status" -ge 124 ]; then
  echo "command crashed, hung or was killed (status $status): $*" >&2
  cat "$stderr_file" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" "$stderr_file"; then
  echo "stderr did not match /$regex/:" >&2
  cat "$stderr_file" >&2
  exit 1
fi
exit 0
