#!/usr/bin/env python3
"""Compares two runs of mpi4py's test suite test by test: the reference (without mpixstream) and the
run with it, each a log per rank of unittest's verbose output (tests/mpi4py/run.sh writes them).

  compare.py --build NAME[,NAME...] --known FILE --np N REF_PREFIX REF_RC LIB_PREFIX LIB_RC

REF_PREFIX.R is rank R's log of the reference run, REF_RC its exit status (124 or 137: timed out);
likewise for the run with mpixstream. A test's outcome on a rank is what unittest printed after its
name: ok, FAIL, ERROR, skipped, expected failure, unexpected success; a subtest (an indented line with
its parameters) is a test of its own. A test that started and has no outcome is "timeout" if its run
timed out, else "crash"; a test one run reached and the other did not is "not run" there.

A test passes when on every rank both runs gave the same outcome, a crash, a timeout and "not run"
never counting as the same; when the reference failed (FAIL, ERROR) or skipped and the run with
mpixstream passed; and not when a test that passed without mpixstream does anything else with it.
A test one rank's log names and neither run reached on any rank is counted apart, never as passed
(tests after a hang of both runs appear in no log at all).

tests/mpi4py/KNOWN rows (build, test id, outcome without mpixstream, reason; the build one of --build's
names) excuse a difference
only where the reference run shows that very outcome on that test (reproduced without mpixstream)
and the run with mpixstream has it too: a KNOWN row never hides a run with mpixstream that is slower
(a timeout where the reference completed) or worse than the reference.

Prints a FAIL or KNOWN line per such test and a last line "COUNTS passed failed known unreached".
"""
import re
import sys

START = re.compile(r"^(\s*)(\w+) \(([\w.]+)\)((?: \(.*\))?)(?: \.\.\. ?(.*))?$")
VERDICTS = [
    ("ok", re.compile(r"^ok\b")),
    ("FAIL", re.compile(r"^FAIL\b")),
    ("ERROR", re.compile(r"^ERROR\b")),
    ("skipped", re.compile(r"^skipped\b")),
    ("expected failure", re.compile(r"^expected failure\b")),
    ("unexpected success", re.compile(r"^unexpected success\b")),
]
NEVER_SAME = {"crash", "timeout", "not run"}


def verdict(text):
    text = text.strip()
    for name, pattern in VERDICTS:
        if pattern.match(text):
            return name
    return None


def parse(path, timed_out):
    """{test id: outcome} of one rank's log, in the order the tests started."""
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return {}
    outcomes, pending, last = {}, None, None
    finished = any(l.startswith("Ran ") and " test" in l for l in lines)
    for line in lines:
        m = START.match(line)
        if m:
            indent, _name, ident, params, rest = m.groups()
            ident = ident + (" [" + params.strip()[1:-1] + "]" if params else "")
            if indent and pending is not None and outcomes.get(pending) is None:
                outcomes[pending] = "subtests"  # its outcome is its subtests'
            outcomes.setdefault(ident, None)
            found = verdict(rest) if rest is not None else None
            if found:
                outcomes[ident] = found
            if not indent:
                pending = ident
            last = ident
            continue
        # A verdict on a line of its own (after the test's own output, or a docstring line).
        if last is not None and outcomes.get(last) is None:
            tail = line.split(" ... ")[-1] if " ... " in line else line
            found = verdict(tail)
            if found:
                outcomes[last] = found
    for ident, outcome in outcomes.items():
        if outcome is None:
            outcomes[ident] = "timeout" if timed_out else ("crash" if not finished else "no outcome")
    return outcomes


def known_rows(path, build):
    rows = {}
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(None, 3)
        if len(fields) == 4 and fields[0] in build.split(","):
            rows[fields[1]] = (fields[2], fields[3].strip())
    return rows


def main():
    args = sys.argv[1:]
    opts = {}
    while args and args[0].startswith("--"):
        opts[args[0]] = args[1]
        args = args[2:]
    ref_prefix, ref_rc, lib_prefix, lib_rc = args
    np = int(opts["--np"])
    known = known_rows(opts["--known"], opts["--build"])
    timed = lambda rc: int(rc) in (124, 137)
    refs = [parse(f"{ref_prefix}.{r}", timed(ref_rc)) for r in range(np)]
    libs = [parse(f"{lib_prefix}.{r}", timed(lib_rc)) for r in range(np)]
    ids = []
    for d in refs + libs:
        ids.extend(i for i in d if i not in ids)
    passed = failed = known_count = unreached = 0
    for ident in ids:
        pairs = [(refs[r].get(ident, "not run"), libs[r].get(ident, "not run")) for r in range(np)]
        if all(p == ("not run", "not run") for p in pairs):
            unreached += 1
            continue
        ok = True
        for ref, lib in pairs:
            same = ref == lib and ref not in NEVER_SAME
            better = ref in ("FAIL", "ERROR", "skipped", "no outcome") and lib == "ok"
            if not (same or better or (ref, lib) == ("not run", "not run")):
                ok = False
        if ok:
            passed += 1
            continue
        where = ", ".join(f"rank {r}: without {a}, with {b}" for r, (a, b) in enumerate(pairs) if a != b or a in NEVER_SAME)
        row = known.get(ident)
        # A KNOWN row: the reference shows its outcome on this test, and the run with mpixstream the same.
        if row and all(a == b == row[0] for a, b in pairs if (a, b) != ("not run", "not run") and (a != b or a in NEVER_SAME)):
            known_count += 1
            print(f"KNOWN {ident}: {where} ({row[1]})")
        else:
            failed += 1
            print(f"FAIL {ident}: {where}")
    print(f"COUNTS {passed} {failed} {known_count} {unreached}")


if __name__ == "__main__":
    main()
