#!/usr/bin/env bash
# ABI: a program compiled with PyPI MPICH 5's mpicc against its own mpi.h (native MPIX prototypes,
# no mpixstream header, not linked to us) runs correctly on Debian's MPICH 4.0.2, which has no streams,
# with libmpixstream.so preloaded, as the README says: `mpixrun --mpich deb -n 2 ./abi_mpich5` (Debian
# ships libmpich.so.12 only: mpixrun points the binary's libmpi.so.12 at it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/abi; mkdir -p "$out/lib"
cat > "$out/abi.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int provided, rank, size, errs = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPIX_Stream s;
    MPI_Comm sc;
    if (MPIX_Stream_create(MPI_INFO_NULL, &s) != MPI_SUCCESS) errs++;
    if (MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &sc) != MPI_SUCCESS) errs++;
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, sc);
    if (sum != size * (size - 1) / 2) errs++;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1;
    MPI_Request r;
    MPI_Irecv(&got, 1, MPI_INT, prev, 7, sc, &r);
    MPI_Send(&rank, 1, MPI_INT, next, 7, sc);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (got != prev) errs++;
    MPIX_Stream back;
    MPIX_Comm_get_stream(sc, 0, &back);
    if (back != s) errs++;
    MPI_Info info;
    MPI_Info_create(&info);
    unsigned long long v = 0x5555DEADBEEFULL;
    MPIX_Info_set_hex(info, "value", &v, sizeof v);
    char text[64];
    int flag = 0;
    MPI_Info_get(info, "value", 63, text, &flag);
    if (!flag || strcmp(text, "EFBEADDE5555[2]") != 0) errs++;
    MPI_Info_free(&info);
    MPI_Comm_free(&sc);
    if (MPIX_Stream_free(&s) != MPI_SUCCESS || s != MPIX_STREAM_NULL) errs++;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    int total;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%.30s | %s\n", lib, total ? "errors" : " No Errors");
    MPI_Finalize();
    return total != 0;
}
C
sed -i '1i #include <string.h>' "$out/abi.c"
mpich_select 5
"$MPICC" -O2 "$out/abi.c" -o "$out/abi_mpich5"
log=$(timeout 60 "$root/scripts/mpixrun" --mpich deb -n 2 "$out/abi_mpich5" 2>&1)
echo "$log"
echo "$log" | grep -q "MPICH Version:.*4.0.2" || { echo "FAIL: did not run on MPICH 4.0.2"; exit 1; }
echo "$log" | grep -q " No Errors" || { echo "FAIL: errors"; exit 1; }
# And without the library it cannot even start: the MPIX symbols are missing from 4.0.2 (the binary's
# libmpi.so.12 pointed at Debian's libmpich.so.12 by hand).
ln -sf /usr/lib/x86_64-linux-gnu/libmpich.so.12 "$out/lib/libmpi.so.12"
mpich_select deb
if LD_LIBRARY_PATH="$out/lib" timeout 60 "$MPIEXEC" -genv LD_LIBRARY_PATH "$out/lib" -n 1 "$out/abi_mpich5" >/dev/null 2>&1; then
  echo "FAIL: the binary ran on 4.0.2 without mpixstream; the test proves nothing"; exit 1
fi
echo "PASS: MPICH 5 binary ran on Debian MPICH 4.0.2 with mpixstream preloaded"
