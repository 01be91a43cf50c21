#!/usr/bin/env bash
# The library stays inert until MPI_Init: preloaded into mpiexec itself, into non-MPI programs and
# into Python it changes nothing; mpi4py programs using plain MPI pass under it, on both MPICHs and in
# both policies.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
lib=$MPIXSTREAM_LIB
fails=0
check() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

# non-MPI programs: same output, nothing on stderr
out=$(LD_PRELOAD=$lib /bin/echo hello 2>&1); [ "$out" = hello ]; check "non-MPI program (echo) unchanged" $?
out=$(LD_PRELOAD=$lib python3 -c 'print(6*7)' 2>&1); [ "$out" = 42 ]; check "python without MPI unchanged" $?
out=$(LD_PRELOAD=$lib sh -c 'ls / >/dev/null && echo ok' 2>&1); [ "$out" = ok ]; check "shell + children unchanged" $?

cat > "$root/build/inert_mpi4py.py" <<'PY'
from mpi4py import MPI
world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
dup = world.Dup()
split = world.Split(rank % 2, rank)
total = dup.allreduce(rank)
assert total == size * (size - 1) // 2, total
peer = (rank + 1) % size
got = dup.sendrecv(rank, dest=peer, source=(rank - 1) % size)
assert got == (rank - 1) % size, got
assert split.allreduce(1) == split.Get_size()
reqs = [dup.isend(i, dest=peer, tag=i) for i in range(10)]
vals = [dup.recv(source=(rank - 1) % size, tag=i) for i in range(10)]
MPI.Request.waitall(reqs)
assert vals == list(range(10)), vals
split.Free(); dup.Free()
if rank == 0:
    print(" No Errors", MPI.Get_library_version().splitlines()[0])
PY
mkdir -p "$root/build/abi/lib"
ln -sf /usr/lib/x86_64-linux-gnu/libmpich.so.12 "$root/build/abi/lib/libmpi.so.12"
for mpich in deb 5; do
  mpich_select $mpich
  libdir=$root/build/abi/lib; [ $mpich = 5 ] && libdir=$MPICH_PREFIX/lib
  # mpiexec itself preloaded: launches as usual
  out=$(LD_PRELOAD=$lib timeout 60 "$MPIEXEC" -n 2 /bin/echo launched 2>&1 </dev/null | grep -c launched)
  [ "$out" = 2 ]; check "mpich=$mpich: mpiexec preloaded launches non-MPI ranks" $?
  for policy in implicit explicit; do
    for np in 2 4; do
      log=$(PYTHONPATH=$root/.deps/mpi4py LD_LIBRARY_PATH=$libdir MPIXSTREAM_POLICY=$policy \
        timeout 120 "$root/scripts/mpixrun" -genv LD_LIBRARY_PATH "$libdir" -n $np python3 "$root/build/inert_mpi4py.py" 2>&1 </dev/null)
      echo "$log" | grep -q " No Errors"; rc=$?
      [ $rc -ne 0 ] && echo "$log" | tail -5
      check "mpich=$mpich policy=$policy np=$np: mpi4py program under mpixstream" $rc
    done
  done
done
[ $fails -eq 0 ]
