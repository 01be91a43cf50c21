#!/usr/bin/env bash
# A test's verdict reads the status of the command it checks. In `check "... $(cmd) ..." $?` the status
# is the command substitution's, expanded first on the same command line: such a verdict cannot fail.
# This test fails on any line of the project's shell scripts where `$?` follows a `$(...)` in the same
# command (a `$((...))` arithmetic expansion is fine), and proves that it can fail: a sample with the
# mistake is caught, the corrected form is not.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }

# file:line:text lines -> those whose `$?` may be a command substitution's status.
suspects() {
  awk '{
    i = index($0, "$?"); if (i == 0) next
    seg = substr($0, 1, i); n = split(seg, parts, "; "); rest = substr($0, i + 2)
    if ($0 ~ /^[^:]*:[0-9]+:[[:space:]]*#/) next
    if (index(parts[n], "$(") && !index(parts[n], "$((") && rest !~ /^\)/) print
  }'
}

scripts=$(git ls-files '*.sh' scripts tests/run.sh .ci | sort -u)
found=$(for f in $scripts; do [ -f "$f" ] && grep -nF '$?' "$f" | sed "s|^|$f:|"; done | suspects)
[ -z "$found" ]
rc=$?
verdict "no verdict in $(echo "$scripts" | wc -w) shell scripts reads a command substitution's status" $rc
[ -n "$found" ] && echo "$found" | sed 's/^/    | /'

# The samples' status is spelled `$st` here, so that this file is not one of its own suspects.
st='$''?'
bad="x.sh:1:  grep -q ok \"\$log\"; check \"ok (\$(wc -l <\"\$log\") lines)\" $st"
good="x.sh:1:  grep -q ok \"\$log\"; rc=$st"
arith="x.sh:2: [ \$((n + 1)) -gt 1 ]; v $st"
[ -n "$(echo "$bad" | suspects)" ] && [ -z "$(echo "$good" | suspects)" ] && [ -z "$(echo "$arith" | suspects)" ]
rc=$?
verdict "the check catches a verdict after a substitution, and passes the corrected form and arithmetic" $rc
exit $failed
