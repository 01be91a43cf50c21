#!/usr/bin/env bash
# The profile and the comparison agree (issue 49), on the halo program a newcomer writes
# (tests/scripts/programs/halo.c: 2 ranks x 2 threads swapping halos; `dup`: each thread on its own
# MPI_Comm_dup, `world`: both on MPI_COMM_WORLD with different tags), MPICH 5.0.2 and Debian 4.0.2:
#   1. `mpixrun --profile`: exit 0; the program's own output shown; the start-up line (the whole run
#      against its MPI section); the tables carry the communicators' full names (as report.json has
#      them); where the busy threads (4) outnumber the cores online, the job's verdict is `cores` and
#      says the contention is for cores, else the endpoints' finding (dup: explicit_helps; world:
#      explicit_cannot_help), and the library's report (run.log) says so once for the job; MPI_COMM_WORLD, used by the main thread alone for a barrier and a reduce,
#      is not named in the dup variant's verdict;
#   2. the timeline: a PNG, and beside it what it drew (timeline.json): a window inside the kept span,
#      the dup variant's series are VCI 0 with three communicators (MPI_COMM_WORLD and two dups), the
#      world variant's one (MPI_COMM_WORLD): the two look different; the legend names the contention
#      ticks and the overlap band;
#   3. on Debian's one endpoint the headline says explicit endpoints cannot help on this MPICH (no
#      "would help" above a detail saying nothing can separate them);
#   4. `mpixrun --compare --reps 7` of both variants (50000 iterations): exit 0, the start-up table (whole run, MPI section),
#      the verdict's details printed under its headline (under explicit, the world variant names what
#      still shares), and the verdict agrees with the measured ratio: where it says explicit endpoints
#      would not help (cores, explicit_cannot_help) the explicit policy's median MPI section (the
#      program's own MPI_Wtime between its barrier and its reduce, in each timed run) is at least 0.9x
#      the implicit one's; where it says they would help, at most 1.1x. A margin on a ratio of medians
#      of the same run, not a timed assertion. Asserted for `dup` (measured 1.27x, medians of 11,
#      2026-12-05); under `world` the traffic is the same on VCI 0 under both policies and the section
#      measured 0.94x, too near the margin on these loaded cores: printed, not asserted.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
out=$root/build/profile_halo; rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$root/.deps/py${PYTHONPATH:+:$PYTHONPATH}
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; return 1; fi; }
cores=$(python3 -c "import os; print(os.sysconf('SC_NPROCESSORS_ONLN'))")
echo "cores online: $cores (the halo program keeps 4 threads busy in MPI)"

for mpich in 5 deb; do
  mpich_select $mpich
  bin=$out/halo-$mpich
  "$MPICC" -O2 "$root/tests/scripts/programs/halo.c" -o "$bin" -lpthread
  verdict "[$mpich] compile halo.c" $? || continue
  variants="dup world"
  [ $mpich = deb ] && variants=dup
  for v in $variants; do
    d=$out/$mpich-profile-$v
    timeout 120 "$root/scripts/mpixrun" --profile --mpich $mpich --out "$d" -n 2 "$bin" $v 5000 >"$d.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
    sed 's/^/    | /' "$d.txt" | grep -v '^    | *$' | head -40
    verdict "[$mpich] $v: mpixrun --profile exits 0 (rc=$rc)" $rc || continue
    grep -q "^  | HALO variant=$v iterations=5000" "$d.txt"
    verdict "[$mpich] $v: the program's own output is shown" $?
    grep -Eq "^whole run [0-9.]+ s; MPI section \(MPI_Init's return to MPI_Finalize's entry, longest rank\) [0-9.]+ s" "$d.txt"
    verdict "[$mpich] $v: the start-up line (whole run against the MPI section)" $?
    python3 - "$d" "$v" "$mpich" "$cores" <<'PY'
import json, re, sys
d, variant, mpich, cores = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(d + ".txt").read()
report, profile = json.load(open(d + "/report.json")), json.load(open(d + "/profile.json"))
errors = []
# The endpoint table's communicators column: every rank's names in full.
for r in report["ranks"]:
    comms = {c["id"]: c["name"] or c["handle"] for c in r["comms"]}
    for e in r["profile"]["endpoints"]:
        names = ",".join(comms[i] for i in e["comms"] if i in comms)
        if not re.search(rf"^ +{r['rank']}  {re.escape(e['endpoint'])} +{re.escape(names)}  ", text, re.M):
            errors.append(f"rank {r['rank']}: no table row with the communicators {names} in full")
busy = sum(h["busy_threads"] for h in profile["hosts"])
crowded = busy > cores
structural = {"dup": "one_endpoint" if mpich == "deb" else "explicit_helps", "world": "explicit_cannot_help"}[variant]
want = "cores" if crowded and structural == "explicit_helps" else structural
print(f"busy threads {busy} on {cores} cores; outcome {profile['outcome']} (endpoints: {profile['endpoint_outcome']}), expected {want}")
if profile["endpoint_outcome"] != structural or profile["outcome"] != want:
    errors.append("outcome")
headline = next((l for l in text.splitlines() if l.startswith("verdict: ")), "")
if crowded and "threads outnumber cores on" not in text:
    errors.append("no line saying the threads outnumber the cores")
# The library's own report (MPIXSTREAM_REPORT, in run.log) says it too, once for the job.
if crowded and open(d + "/run.log").read().count("verdict (job): threads outnumber cores on ") != 1:
    errors.append("the report in run.log: no (or more than one) job line on the cores")
if want == "cores" and not headline.startswith("verdict: explicit endpoints would not help here: more threads were busy in MPI than the node has cores"):
    errors.append(f"headline: {headline}")
if mpich == "deb" and ("would help" in headline or not headline.startswith("verdict: explicit endpoints cannot help on this MPICH")):
    errors.append(f"Debian's headline: {headline}")
verdict_text = text[text.index("\nverdict: "):]
if variant == "dup" and "MPI_COMM_WORLD" in verdict_text.split("\nthe guided policy")[0]:
    errors.append("MPI_COMM_WORLD (the main thread's barrier and reduce) named in the verdict")
# The timeline and what it drew.
t = json.load(open(d + "/timeline.json"))
if not (t["kept_span_ms"][0] <= t["window_ms"][0] < t["window_ms"][1] <= t["kept_span_ms"][1]):
    errors.append(f"window {t['window_ms']} outside {t['kept_span_ms']}")
comms = sorted(l.split(" · ", 1)[1] for l in t["legend"] if " · " in l)
want_comms = ["MPI_COMM_WORLD", "comm 1 (MPI_Comm_dup)", "comm 2 (MPI_Comm_dup)"] if variant == "dup" else ["MPI_COMM_WORLD"]
if comms != want_comms or any(not l.startswith("VCI 0 · ") for l in t["legend"] if " · " in l):
    errors.append(f"legend series {t['legend']}, expected VCI 0 with {want_comms}")
if not any(l.startswith("tick:") for l in t["legend"]) or "two or more threads inside one endpoint" not in t["legend"]:
    errors.append(f"legend {t['legend']}: no contention tick or overlap band")
if sum(t["series"].values()) < 50 or t["contended_marks"] == 0:
    errors.append(f"drew {t['series']} bars, {t['contended_marks']} ticks")
print("\n".join(errors) or "profile ok")
sys.exit(1 if errors else 0)
PY
    verdict "[$mpich] $v: full communicator names, the verdict for $cores cores, the timeline's window and series" $?
    [ "$(head -c 4 "$d/timeline.png" | od -An -c | tr -d ' ')" = '211PNG' ]
    verdict "[$mpich] $v: timeline.png is a PNG" $?
  done
done
# The two variants look different: their timelines' series differ.
cmp -s <(python3 -c "import json,sys; print(sorted(json.load(open(sys.argv[1]))['legend']))" "$out/5-profile-dup/timeline.json") \
  <(python3 -c "import json,sys; print(sorted(json.load(open(sys.argv[1]))['legend']))" "$out/5-profile-world/timeline.json")
verdict "[5] the dup and world timelines draw different series" $(( $? == 0 ))

# --compare: the verdict against the measured ratio.
mpich_select 5
for v in dup world; do
  d=$out/5-compare-$v
  timeout 300 "$root/scripts/mpixrun" --compare --reps 7 --mpich 5 --out "$d" --timeout 60 -n 2 "$out/halo-5" $v 50000 \
    >"$d.txt" 2>"$d.err"
  rc=$?
  [ $rc -ne 0 ] && bash "$root/scripts/shm_cleanup.sh"
  sed 's/^/    | /' "$d.txt" | grep -v '^    | *$'
  verdict "[5] $v: mpixrun --compare exits 0 (rc=$rc)" $rc || continue
  grep -q '^start-up apart' "$d.txt" && grep -Eq '^implicit +[0-9.]+ +[0-9.]+ +[0-9.]+ +1$' "$d.txt" &&
    grep -Eq '^explicit +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$d.txt"
  verdict "[5] $v: the start-up table (whole run, MPI section, outside it, the section's ratio)" $?
  ! grep -q 'see what still shares' "$d.txt" && grep -q '^implicit: ' "$d.txt" && grep -Eq '^ +rank [0-9]' "$d.txt"
  verdict "[5] $v: the verdict's details printed under its headline" $?
  if [ $v = world ]; then
    grep -q 'still shared under the explicit policy: comm 0 (MPI_COMM_WORLD) (T0, T1, T2)' "$d.txt"
    verdict "[5] world: under explicit, what still shares is named" $?
  fi
  python3 - "$d" "$v" <<'PY'
import json, re, statistics, sys
d, variant = sys.argv[1], sys.argv[2]
c = json.load(open(d + "/compare.json"))
outcome = c["policies"]["implicit"]["profile"]["outcome"]
sections = {}
for p in ("implicit", "explicit"):
    runs = []
    for rep in range(1, 8):
        m = re.search(r"section_s=([0-9.]+)", open(f"{d}/logs/{p}-timed-{rep}.log").read())
        runs.append(float(m.group(1)))
    sections[p] = statistics.median(runs)
ratio = sections["explicit"] / sections["implicit"]
wall = c["policies"]["explicit"]["ratio_to_implicit"]
print(f"implicit verdict {outcome}; the program's MPI section, median of 7: implicit {sections['implicit']:.4f} s, "
      f"explicit {sections['explicit']:.4f} s, ratio {ratio:.3f}; whole-run ratio {wall:.3f}; "
      f"report runs' section ratio {c['policies']['explicit'].get('section_ratio_to_implicit')}")
if variant == "world":
    # Not asserted: the same traffic on VCI 0 under both policies; the explicit policy's section measured
    # 0.94x (medians of 11, 2026-12-05), too near the margin on these loaded cores.
    ok = True
elif outcome in ("explicit_helps", "partly"):
    ok = ratio <= 1.1
else:
    ok = ratio >= 0.9 and wall >= 0.9
sys.exit(0 if ok and "section_ratio_to_implicit" in c["policies"]["explicit"] else 1)
PY
  verdict "[5] $v: the profile's verdict and the measured ratio agree (margin 10 %; world: printed only)" $?
done
exit $failed
