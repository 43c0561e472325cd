#!/usr/bin/env bash
# Usage: check.sh BUILD_DIR SOURCE_DIR. Installs the build into a temporary prefix and builds and
# runs the consumer project against it with find_package(sparsgd).
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/tests/package" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer" | grep -q "selected 10 of 1000"
echo "find_package(sparsgd) consumer: ok"
