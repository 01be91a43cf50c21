#!/usr/bin/env bash
# mpixrun --profile and --compare across 2 simulated hosts (scripts/hosts.sh), 1 rank per host, on the
# halo program (tests/scripts/programs/halo.c, `dup`: each of 2 threads on its own MPI_Comm_dup), on
# MPICH 5.0.2 over its default netmod, ch4:ucx (MPICHS="5 5-ofi" adds ch4:ofi):
#   1. `mpixrun --profile --hosts h1,h2`: exit 0; report.json has a rank on each host (the report's
#      hosts, one rank each); profile.json's per-host table names both hosts, each with its 1 rank and
#      its cores; the printed verdict; timeline.png is a PNG and timeline.json drew lanes of both ranks' threads;
#      the guided command printed repeats --hosts;
#   2. `mpixrun --compare --reps 2 --hosts h1,h2`: exit 0; the table's rows (implicit and explicit,
#      median [min..max]) and the ratio; compare.json: 2 timed runs per policy, all exit 0, the explicit
#      policy's traffic on streams of its own (the two dups' streams), none under implicit; every run's
#      log shows the job on 2 hosts (the banner: "2 ranks on 2 hosts"); compare.png is a PNG.
# Exits 1 if a check failed, 77 (SKIP) where hosts cannot be made here.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
source "$root/tests/scripts/hosts_up.bash"
hosts_or_skip
hosts_up
out=$root/build/hosts_profile; rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; return 1; fi; }
png() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '211PNG' ]; }

for mpich in ${MPICHS:-5}; do
  mpich_select "$mpich"
  bin=$out/halo-$MPICH_NAME
  "$MPICC" -O2 "$root/tests/scripts/programs/halo.c" -o "$bin" -lpthread
  verdict "[$mpich] compile halo.c" $? || continue

  d=$out/$MPICH_NAME-profile
  MPIXSTREAM_VERBOSE=1 timeout 120 "$root/scripts/mpixrun" --profile --mpich "$mpich" --hosts h1,h2 --out "$d" \
    -n 2 "$bin" dup 5000 >"$d.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && { bash "$root/scripts/shm_cleanup.sh"; "$hosts" reap; }
  sed 's/^/    | /' "$d.txt" | grep -v '^    | *$' | head -30
  if verdict "[$mpich] mpixrun --profile --hosts h1,h2 exits 0 (rc=$rc)" $rc; then
    python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
text = open(d + ".txt").read()
report, profile = json.load(open(d + "/report.json")), json.load(open(d + "/profile.json"))
errors = []
hosts = sorted((r.get("profile") or {}).get("host") or "?" for r in report["ranks"])
if hosts != ["h1", "h2"]:
    errors.append(f"report.json: the ranks' hosts {hosts}, expected h1 and h2")
ph = {h["host"]: h for h in profile["hosts"]}
if sorted(ph) != ["h1", "h2"] or sorted(r for h in ph.values() for r in h["ranks"]) != [0, 1] \
        or any(len(h["ranks"]) != 1 or not h.get("cores") for h in ph.values()):
    errors.append(f"profile.json hosts {profile['hosts']}: expected h1 and h2, 1 rank and its cores each")
if "\nverdict: " not in text:
    errors.append("no verdict printed")
guided = [l for l in text.splitlines() if "MPIXSTREAM_POLICY=guided" in l]
# (printf %q writes the list's comma as "\\,")
if not guided or not any(h in guided[-1] for h in ("--hosts h1,h2", "--hosts h1\\,h2")):
    errors.append(f"the guided command does not repeat --hosts: {guided}")
t = json.load(open(d + "/timeline.json"))
lane_ranks = sorted({l.split()[1].rstrip(":") for l in t["lanes"] if l.startswith("rank ") and " T" in l})
if sum(t["series"].values()) < 50 or lane_ranks != ["0", "1"]:
    errors.append(f"timeline drew {t['series']} in lanes {t['lanes']}: expected both ranks' threads")
print("\n".join(errors) or f"profile ok: hosts {sorted(ph)}")
sys.exit(1 if errors else 0)
PY
    verdict "[$mpich] --profile: the report's ranks on h1 and h2, profile.json's hosts (1 rank, cores each), the verdict, the guided command with --hosts" $?
    png "$d/timeline.png"
    verdict "[$mpich] --profile: timeline.png is a PNG" $?
  fi

  d=$out/$MPICH_NAME-compare
  MPIXSTREAM_VERBOSE=1 timeout 300 "$root/scripts/mpixrun" --compare --reps 2 --mpich "$mpich" --hosts h1,h2 --out "$d" \
    --timeout 60 -n 2 "$bin" dup 5000 >"$d.txt" 2>"$d.err"
  rc=$?
  [ $rc -ne 0 ] && { bash "$root/scripts/shm_cleanup.sh"; "$hosts" reap; }
  sed 's/^/    | /' "$d.txt" | grep -v '^    | *$' | head -30
  verdict "[$mpich] mpixrun --compare --hosts h1,h2 exits 0 (rc=$rc)" $rc || { tail -5 "$d.err"; continue; }
  grep -Eq '^implicit +[0-9.]+  \[[0-9.]+ \.\. [0-9.]+\]' "$d.txt" &&
    grep -Eq '^explicit +[0-9.]+  \[[0-9.]+ \.\. [0-9.]+\] +[0-9.]+$' "$d.txt" &&
    grep -q '^explicit takes [0-9.]*x the wall time of implicit' "$d.txt"
  verdict "[$mpich] --compare: the table's rows (median [min..max] per policy) and the ratio" $?
  python3 - "$d/compare.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
imp, exp = c["policies"]["implicit"], c["policies"]["explicit"]
errors = []
for name, p in (("implicit", imp), ("explicit", exp)):
    if len(p["runs"]) != 2 or p["statuses"] != [0, 0]:
        errors.append(f"{name}: runs {p['runs']} statuses {p['statuses']}")
streams = sorted(k for k in exp["endpoints"] if k.startswith("stream"))
if len(streams) < 2 or any(exp["endpoints"][k]["messages"] == 0 for k in streams):
    errors.append(f"explicit: the dups' traffic not on streams of their own: {exp['endpoints']}")
if any(k.startswith("stream") for k in imp["endpoints"]):
    errors.append(f"implicit: traffic on streams: {imp['endpoints']}")
print("\n".join(errors) or f"compare.json ok: explicit endpoints {sorted(exp['endpoints'])}")
sys.exit(1 if errors else 0)
PY
  verdict "[$mpich] --compare: compare.json, 2 timed runs per policy, explicit on the dups' own streams, implicit on none" $?
  nlogs=$(ls "$d"/logs/*.log 2>/dev/null | wc -l)
  n2=$(grep -l '2 ranks on 2 hosts' "$d"/logs/*.log 2>/dev/null | wc -l)
  [ "$nlogs" -ge 4 ] && [ "$n2" -eq "$nlogs" ]
  verdict "[$mpich] --compare: every run's banner says 2 ranks on 2 hosts ($n2 of $nlogs logs)" $?
  png "$d/compare.png"
  verdict "[$mpich] --compare: compare.png is a PNG" $?
done
exit $failed
