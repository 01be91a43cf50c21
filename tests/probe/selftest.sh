#!/usr/bin/env bash
# Proves that ucxprobe.so sees where MPICH sends messages, using plain MPICH
# only (no mpixstream library).  Prints PASS/FAIL/SKIP lines; exits non-zero
# if any check fails.  Usage: tests/probe/selftest.sh [BUILDDIR]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/probe}
source "$root/scripts/env.sh"
"$here/build.sh" "$out" || { echo "FAIL build ucxprobe.so"; exit 1; }
probe=$out/ucxprobe.so
runs=$(mktemp -d "${TMPDIR:-/tmp}/ucxprobe.XXXXXX")
trap 'rm -rf "$runs"' EXIT
failed=0 n=0

# UCX over loopback only; NOLOCAL makes same-node peers use the netmod (UCX)
# instead of shared memory, otherwise the probe sees nothing (checked below).
UCX_ENV=(-genv MPIR_CVAR_NOLOCAL 1 -genv UCX_NET_DEVICES lo)
VCI_ENV=(-genv MPIR_CVAR_CH4_NUM_VCIS 1 -genv MPIR_CVAR_CH4_RESERVE_VCIS 3)

# run NAME EXE ARGS... [-- MPIEXEC_OPTS...]: 2 ranks, reports in $runs/NAME
run() {
  local name=$1 exe=$2; shift 2
  local args=() opts=()
  while (($#)) && [[ $1 != -- ]]; do args+=("$1"); shift; done
  (($#)) && shift && opts=("$@")
  mkdir -p "$runs/$name"
  if ! UCXPROBE_DIR=$runs/$name UCXPROBE_VERBOSE=1 timeout 60 "$MPIEXEC" -n 2 -genv LD_PRELOAD "$probe" \
      "${opts[@]}" "$exe" "${args[@]}" >"$runs/$name.log" 2>&1; then
    echo "FAIL run $name ($MPICH_NAME): see log below"; sed 's/^/  | /' "$runs/$name.log"
    failed=1; return 1
  fi
}

# check DESCRIPTION PYTHON-EXPR RUN...: the expression gives (ok, detail) and
# sees D[run] = summarize.load(reports) and L[run] = the run's stderr/stdout.
check() {
  local desc=$1 expr=$2 detail; shift 2
  n=$((n + 1))
  if detail=$(python3 - "$runs" "$expr" "$@" 2>&1 <<'EOF'
import sys, os
sys.path.insert(0, os.environ["PROBE_HERE"])
from summarize import load
runs, expr, names = sys.argv[1], sys.argv[2], sys.argv[3:]
D = {n: load(os.path.join(runs, n)) for n in names}
L = {n: open(os.path.join(runs, n + ".log")).read().splitlines() for n in names}

def delta(a, b, rank, field):
    """{worker: a - b} for one counter: traffic beyond the baseline run b."""
    ws = set(D[a][rank]) | set(D[b][rank])
    return {w: D[a][rank].get(w, {}).get(field, 0) - D[b][rank].get(w, {}).get(field, 0)
            for w in sorted(ws)}

def col(name, rank, field):
    return {w: c.get(field, 0) for w, c in sorted(D[name][rank].items())}

def pid_of(name, rank):
    for f in os.listdir(os.path.join(runs, name)):
        head = open(os.path.join(runs, name, f)).readline().split()
        if head[0] == f"rank={rank}":
            return int(head[2].split("=")[1])

def line_no(name, text):
    return next((i for i, l in enumerate(L[name]) if text in l), None)

ok, detail = eval(expr)
print(detail)
sys.exit(0 if ok else 1)
EOF
  ); then echo "PASS $desc"; else echo "FAIL $desc"; failed=1; fi
  echo "      $detail"
}
export PROBE_HERE=$here

# ---- MPICH 5.0.2: native streams on reserved VCIs -----------------------------
if mpich_select 5 2>/dev/null && [[ -x $MPICC ]]; then
  "$MPICC" -O2 -pthread -o "$out/probe_selftest.5" "$here/probe_selftest.c" || { echo "FAIL compile (5)"; exit 1; }
  exe=$out/probe_selftest.5
  run base5 "$exe" streams 0 -- "${UCX_ENV[@]}" "${VCI_ENV[@]}" &&
  run str5 "$exe" streams 100 -- "${UCX_ENV[@]}" "${VCI_ENV[@]}" && {
    check "mpich5: NUM_VCIS=1 RESERVE_VCIS=3 gives 4 UCX workers per rank, all created in MPI_Init" \
      '(all(len(D["base5"][r]) == 4 for r in (0, 1)), {r: sorted(D["base5"][r]) for r in (0, 1)})' base5
    check "mpich5: reserved workers 1..3 are created inside MPI_Init (not lazily at MPIX_Stream_create)" \
      '(lambda p: (lambda w, m: (w is not None and m is not None and w < m, f"rank 0 pid {p}: worker 3 created at log line {w}, after MPI_Init marker at line {m}"))(
          line_no("base5", f"ucxprobe[{p}]: worker 3 created"), line_no("base5", "selftest[rank 0]: after MPI_Init")))(pid_of("base5", 0))' base5
    check "mpich5: baseline (Init, 3x Stream_comm_create, frees, Finalize) is on worker 0 only" \
      '(all(c["sends"] == c["recvs"] == 0 for r in (0, 1) for w, c in D["base5"][r].items() if w != 0),
        {r: {w: (c["sends"], c["recvs"]) for w, c in D["base5"][r].items()} for r in (0, 1)})' base5
    check "mpich5: rank 0 sends 100/200/300 on 3 distinct non-zero workers (beyond baseline: none)" \
      '(lambda d: (sorted(v for w, v in d.items() if v) == [100, 200, 300]
                   and all(w > 0 for w, v in d.items() if v), d))(delta("str5", "base5", 0, "sends"))' str5 base5
    check "mpich5: rank 0 raw send counts on those workers are exactly 100/200/300, 8 bytes each" \
      '(lambda s, b: (sorted(s[w] for w in (1, 2, 3)) == [100, 200, 300]
                      and all(b[w] == 8 * s[w] for w in (1, 2, 3)), (s, b)))(col("str5", 0, "sends"), col("str5", 0, "send_bytes"))' str5
    check "mpich5: rank 1 receives 100/200/300 on 3 distinct non-zero workers, 8 bytes each" \
      '(lambda r, b: (sorted(r[w] for w in (1, 2, 3)) == [100, 200, 300] and r[0] == D["base5"][1][0]["recvs"]
                      and all(b[w] == 8 * r[w] for w in (1, 2, 3)), (r, b)))(col("str5", 1, "recvs"), col("str5", 1, "recv_bytes"))' str5 base5
    check "mpich5: stream comm i uses worker i+1 on both ranks (reserved VCIs in creation order)" \
      '(col("str5", 0, "sends") == {0: D["base5"][0][0]["sends"], 1: 100, 2: 200, 3: 300}
        and col("str5", 1, "recvs") == {0: D["base5"][1][0]["recvs"], 1: 100, 2: 200, 3: 300},
        (col("str5", 0, "sends"), col("str5", 1, "recvs")))' str5 base5
  }
  run thr5 "$exe" threads 100 -- "${UCX_ENV[@]}" "${VCI_ENV[@]}" &&
    check "mpich5: same with one thread per stream comm (THREAD_MULTIPLE): 100/200/300 on workers 1/2/3, exact bytes" \
      '(all(delta("thr5", "base5", r, f) == {0: 0, 1: m * 100, 2: m * 200, 3: m * 300}
            for r, f, m in ((0, "sends", 1), (0, "send_bytes", 8), (1, "recvs", 1), (1, "recv_bytes", 8))),
        (col("thr5", 0, "sends"), col("thr5", 1, "recvs")))' thr5 base5
  run plain5 "$exe" plain 0 -- "${UCX_ENV[@]}" &&
  run calls5 "$exe" calls -- "${UCX_ENV[@]}" && {
    check "mpich5: MPI_Init/Finalize baseline (1 VCI) is 2 sends + 2 recvs on worker 0" \
      '(all(col("plain5", r, "sends") == {0: 2} and col("plain5", r, "recvs") == {0: 2} for r in (0, 1)),
        {r: D["plain5"][r] for r in (0, 1)})' plain5
    check "mpich5: eager/1MiB/ssend/isend/probe/mprobe = 6 tag sends (1 sync), 6 recvs (1 msg_recv), exact bytes" \
      '(delta("calls5", "plain5", 0, "sends") == {0: 6} and delta("calls5", "plain5", 0, "ssends") == {0: 1}
        and delta("calls5", "plain5", 1, "recvs") == {0: 6} and delta("calls5", "plain5", 1, "mrecvs") == {0: 1}
        and delta("calls5", "plain5", 1, "recv_bytes") == {0: (1 << 20) + 5 * 8}
        and delta("calls5", "plain5", 0, "am_sends") == {0: 0},
        {f: delta("calls5", "plain5", r, f) for r, f in ((0, "sends"), (0, "ssends"), (1, "recvs"), (1, "mrecvs"), (1, "recv_bytes"))})' calls5 plain5
  }
  # Negative control: without NOLOCAL the same program uses shared memory and
  # the probe must see none of the 600 messages.
  run shm5 "$exe" streams 100 -- -genv UCX_NET_DEVICES lo "${VCI_ENV[@]}" &&
    check "mpich5: without MPIR_CVAR_NOLOCAL=1 the traffic goes through shm, probe counts 0" \
      '(all(c["sends"] == c["recvs"] == 0 for r in (0, 1) for c in D["shm5"][r].values()),
        {r: col("shm5", r, "sends") for r in (0, 1)})' shm5
else
  echo "SKIP mpich5: $root/.deps/mpich5 not installed"
fi

# ---- Debian MPICH 4.0.2: one VCI, everything on worker 0 -----------------------
if mpich_select deb && [[ -x $MPICC ]]; then
  "$MPICC" -O2 -pthread -o "$out/probe_selftest.deb" "$here/probe_selftest.c" || { echo "FAIL compile (deb)"; exit 1; }
  exe=$out/probe_selftest.deb
  run basedeb "$exe" plain 0 -- "${UCX_ENV[@]}" &&
  run plaindeb "$exe" plain 100 -- "${UCX_ENV[@]}" && {
    check "deb 4.0.2: one UCX worker per rank; Init/Finalize baseline sends nothing over UCX" \
      '(all(list(D["basedeb"][r]) == [0] and D["basedeb"][r][0]["sends"] == D["basedeb"][r][0]["recvs"] == 0 for r in (0, 1)),
        {r: D["basedeb"][r] for r in (0, 1)})' basedeb
    check "deb 4.0.2: 100 sends (rank 0) / 100 recvs (rank 1) all on worker 0" \
      '(col("plaindeb", 0, "sends") == {0: 100} and col("plaindeb", 1, "recvs") == {0: 100}
        and col("plaindeb", 0, "send_bytes") == {0: 800} and col("plaindeb", 1, "recv_bytes") == {0: 800},
        (col("plaindeb", 0, "sends"), col("plaindeb", 1, "recvs")))' plaindeb
  }
else
  echo "SKIP deb: /usr/bin/mpicc.mpich not installed"
fi

if ((failed)); then echo "selftest: FAIL"; exit 1; fi
echo "selftest: PASS ($n checks)"
