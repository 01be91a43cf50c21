#!/usr/bin/env bash
# Brings what mpixstream needs onto a fresh Debian machine; idempotent and quiet.
#   - Debian's MPICH 4.0.2 (mpich, libmpich-dev): the "serial" backend's reference build
#   - PyPI's MPICH 5.0.2 into .deps/mpich5: the "native" backend's reference build
#   - python tools for the report/plot scripts (into .deps/py)
# Everything project-local lives under .deps/ (git-ignored).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
mkdir -p "$deps"

need_apt=()
for pkg in mpich libmpich-dev gcc make python3-pip; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install: apt-get install ${need_apt[*]}"
  if [ ! -f "$deps/.apt-updated" ]; then apt-get update -qq >/dev/null && touch "$deps/.apt-updated"; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$deps/mpich5/bin/mpicc" ]; then
  echo "install: PyPI mpich==5.0.2 into .deps/mpich5"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
    --prefix "$deps/mpich5" mpich==5.0.2
fi

if [ ! -f "$deps/py/.done" ]; then
  echo "install: python tools (matplotlib, jsonschema) into .deps/py"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
    --target "$deps/py" matplotlib jsonschema
  touch "$deps/py/.done"
fi

if [ ! -f "$deps/mpi4py/.done" ]; then
  echo "install: mpi4py (binary wheel for MPICH's ABI; loads the installed libmpi.so.12 at run time) into .deps/mpi4py"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
    --only-binary :all: --target "$deps/mpi4py" mpi4py==4.1.2
  touch "$deps/mpi4py/.done"
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install: cargo is missing; install a Rust toolchain (rustup) first" >&2
  exit 1
fi
