#!/usr/bin/env bash
# The process-wide bound on hidden communicators of multiplex communicators (docs/multiplex.md, "Cost";
# tests/scripts/programs/multiplex_bound.c: 56 multiplex communicators of 4 streams at once on 2
# processes, then 10 freed and one more made). On MPICH 5.0.2 (native backend) the report's multiplex
# counters of each rank must read 52 on the streams' endpoints and 5 on the implicit pool, and rank 0
# must say why on stderr; on Debian 4.0.2 (serial backend) all 57 are pooled. Data is checked by the
# program either way. Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/multiplex_bound; mkdir -p "$out"
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
for mpich in 5 deb; do
  mpich_select $mpich
  bin=$out/multiplex_bound-$mpich
  "$MPICC" -O2 -I"$root/include" "$root/tests/scripts/programs/multiplex_bound.c" -o "$bin" \
    -L"$root/target/release" -lmpixstream -Wl,-rpath,"$root/target/release" || { verdict "compile $mpich" 1; continue; }
  rep=$out/report-$mpich.json; rm -f "$rep"
  MPIXSTREAM_STREAMS=4 MPIXSTREAM_REPORT=$rep timeout 180 "$root/scripts/mpixrun" -n 2 "$bin" \
    >"$out/out-$mpich.txt" 2>"$out/err-$mpich.txt"
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  grep -q " No Errors" "$out/out-$mpich.txt"
  verdict "mpich=$mpich: 57 multiplex communicators carry their messages (rc=$rc)" $(( rc != 0 || $? != 0 ))
  want="52 5"; [ "$mpich" = deb ] && want="0 57"
  got=$(python3 -c '
import json, sys
rep = json.load(open(sys.argv[1]))
print(" ".join(sorted({"%d %d" % (r["multiplex"]["on_streams"], r["multiplex"]["pooled"]) for r in rep["ranks"]})))' "$rep" 2>&1)
  [ "$got" = "$want" ]
  verdict "mpich=$mpich: report's multiplex counters on every rank: on_streams pooled = $got (want $want)" $?
  if [ "$mpich" = 5 ]; then
    [ "$(grep -c "would pass a process's bound of 1024" "$out/err-$mpich.txt")" = 5 ]
    verdict "mpich=5: rank 0 says 5 times that the process's bound of 1024 is reached" $?
  fi
done
exit $failed
