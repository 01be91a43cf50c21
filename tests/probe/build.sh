#!/usr/bin/env bash
# Builds the test-only UCX probe: tests/probe/build.sh [OUTDIR]  (default build/probe)
# Idempotent and quiet: rebuilds only when ucxprobe.c is newer; prints nothing on success.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$(cd "$here/../.." && pwd)/build/probe}
mkdir -p "$out"
so=$out/ucxprobe.so
if [[ ! -e $so || $here/ucxprobe.c -nt $so ]]; then
  # Only UCX headers are needed (Debian libucx-dev); the real symbols are found
  # at run time with dlsym(RTLD_NEXT), so no -lucp: the same .so serves any UCX.
  ${CC:-gcc} -O2 -g -Wall -Wextra -Werror -shared -fPIC -std=gnu11 \
    -o "$so.tmp" "$here/ucxprobe.c" -ldl
  mv -f "$so.tmp" "$so"
fi
