#!/usr/bin/env bash
# Usage: check.sh BUILD_DIR SOURCE_DIR. Installs the build into a temporary prefix and builds and
# runs the consumer project against it with find_package(sparsgd).
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# The LibTorch the build used (inside the .venv's torch wheel), as a user's project passes it.
torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt")
prefixes="$work/prefix"
[ -z "$torch_dir" ] || [ "$torch_dir" = Torch_DIR-NOTFOUND ] || prefixes="$prefixes;$torch_dir"
cmake -S "$source/tests/package" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefixes" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer" | grep -q "selected 10 of 1000"
echo "find_package(sparsgd) consumer: ok"
