#!/usr/bin/env bash
# The reserved VCI pool on MPICH 5.0.2 (shim/src/backend/pool_size.rs, docs/policy.md "Reserved pool"):
#   1. under `implicit`, a program that never names MPIX_Stream_create gets no reserved VCIs (MPI_T reads
#      MPIR_CVAR_CH4_RESERVE_VCIS = 0) and the banner says why; one that names it gets the default (8);
#      MPIXSTREAM_STREAMS set by the user reserves that many for a program at MPI_THREAD_MULTIPLE;
#   2. under `explicit` (a program at MPI_THREAD_MULTIPLE that names a communicator constructor) the
#      default fits the node: 8 at 2 ranks, 6 at 4 (MPICH maps V² × ranks × 1.06 MB
#      of shared memory for V VCIs; the default stays within 256 MiB);
#   3. a pool MPICH 5 cannot map (over 2 GiB: 31 reserved at 2 ranks) is refused at MPI_Init, on
#      MPIXSTREAM_STREAMS and on MPIR_CVAR_CH4_RESERVE_VCIS set directly, with the variable and the
#      largest size that fits named, instead of MPICH's "Out of memory" abort.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/reserved-pool
rm -rf "$out"; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
mpich_select 5
# plain: MPI_Init, names nothing; multiple: MPI_Init_thread(MULTIPLE); dups: that and names MPI_Comm_dup
# (what the explicit policy moves); uses: names MPIX_Stream_create (tests/scripts/inert_level_pool.sh
# covers the programs below MPI_THREAD_MULTIPLE, which get no pool).
src=$root/tests/scripts/programs/read_reserve.c
"$MPICC" "$src" -o "$out/plain" && "$MPICC" -DUSES_STREAMS -I"$root/include" "$src" -o "$out/uses" &&
  "$MPICC" -DLEVEL=MPI_THREAD_MULTIPLE "$src" -o "$out/multiple" &&
  "$MPICC" -DLEVEL=MPI_THREAD_MULTIPLE -DUSES_DUP "$src" -o "$out/dups" || { echo "FAIL compile"; exit 1; }

# run NAME EXPECTED-LINE NPROCS PROGRAM [KEY=VALUE ...]: rank 0 prints EXPECTED-LINE, exit 0
run() {
  local name=$1 want=$2 n=$3 prog=$4; shift 4
  env LD_PRELOAD="$MPIXSTREAM_LIB" MPIXSTREAM_VERBOSE=1 "$@" timeout 60 "$MPIEXEC" -n "$n" "$out/$prog" \
    >"$out/$name.out" 2>"$out/$name.log"
  local rc=$?
  grep -qx "$want" "$out/$name.out" && [ $rc -eq 0 ]
  verdict "$name: '$want'" $?
  [ $rc -eq 0 ] && grep -qx "$want" "$out/$name.out" || cat "$out/$name.out" "$out/$name.log" | sed 's/^/    | /' | tail -5
}
run implicit-multiple "reserve 0" 2 multiple
grep -q "nothing loaded calls MPIX_Stream_create: no VCIs reserved" "$out/implicit-multiple.log"
verdict "implicit-multiple: the banner says why nothing is reserved" $?
run implicit-uses "reserve 8" 2 uses
run implicit-multiple-sized "reserve 3" 2 multiple MPIXSTREAM_STREAMS=3
run explicit-2 "reserve 8" 2 dups MPIXSTREAM_POLICY=explicit
run explicit-4 "reserve 6" 4 dups MPIXSTREAM_POLICY=explicit

# refused NAME TEXT... -- KEY=VALUE ...: MPI_Init fails fast (non-zero exit within the timeout) naming TEXTs
refused() {
  local name=$1 var=$2 fits=$3; shift 3
  env LD_PRELOAD="$MPIXSTREAM_LIB" "$@" timeout 60 "$MPIEXEC" -n 2 "$out/uses" >"$out/$name.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "mpixstream: $var=31: with 2 ranks on this node" "$out/$name.log" &&
    grep -q "at most $fits reserved VCIs fit" "$out/$name.log" && ! grep -q "Out of memory" "$out/$name.log"
  verdict "$name: refused at MPI_Init naming $var=31 and the $fits that fit" $?
}
refused refuse-streams MPIXSTREAM_STREAMS 30 MPIXSTREAM_STREAMS=31
refused refuse-mpich-variable MPIR_CVAR_CH4_RESERVE_VCIS 30 MPIR_CVAR_CH4_RESERVE_VCIS=31
exit $failed
