#!/usr/bin/env bash
# The unsafe rule (docs/architecture.md, "Unsafe at the edge"):
# - every crate root denies unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks and
#   clippy::missing_safety_doc, and no source (nor the code build.rs generates) allows them or
#   clippy::not_unsafe_ptr_arg_deref again (clippy itself runs in tests/run.sh,
#   cargo-lints: with the denials in place, an unsafe block without its SAFETY comment fails the suite);
# - `unsafe` outside wrappers/ and the extern "C" entry points stays within the budget below
#   (tests/scripts/unsafe_count.py counts it);
# - every extern "C" entry point runs inside the one panic guard;
# and each check can fail: a root without the denial, a line over the count, an unguarded entry point
# are caught.
# Prints PASS/FAIL per check; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
failed=0
verdict() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }

# The most `unsafe` lines allowed outside wrappers/ and the entry points (342 when the rule landed, 26
# once the hooks and routes took the application's arguments wrapped: wrappers/src/app.rs; never raise
# it without a reason in the commit).
BUDGET=26
DENY='#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]'
ROOTS="wrappers/src/lib.rs shim/src/lib.rs tools/src/lib.rs"

# dir -> the crate roots of dir that lack the denial, and any source under dir that allows one of the lints.
breaches() {
  local dir=$1 f
  for f in $ROOTS; do grep -qxF "$DENY" "$dir/$f" || echo "$f: no '$DENY'"; done
  # Each file read whole (-z: one record), so an attribute split over lines (or a generator's string
  # continued on the next line) is read as one: [^)]* spans newlines.
  grep -rlzE "allow\\([^)]*($SAFETY_LINTS)" \
    --include='*.rs' "$dir/wrappers" "$dir/shim" "$dir/tools" 2>/dev/null | sed "s|^$dir/||; s|\$|: allows a safety lint|"
}
# The lints that guard unsafe code: none may be allowed, in the sources or in what build.rs generates.
SAFETY_LINTS='unsafe_op_in_unsafe_fn|undocumented_unsafe_blocks|missing_safety_doc|not_unsafe_ptr_arg_deref'

found=$(breaches "$root")
[ -z "$found" ]
rc=$?
verdict "every crate root denies the unsafe lints and nothing allows them again" $rc
[ -n "$found" ] && echo "$found" | sed 's/^/    | /'

# The generated code of the newest build (build.rs writes it under target/): the same rule.
newest=$(ls -t target/*/build/mpixstream-wrappers-*/out/forwarders.rs 2>/dev/null | head -n 1)
generated=${newest%/forwarders.rs}
if [ -n "$generated" ]; then
  allowing=$(grep -lzE "allow\\([^)]*($SAFETY_LINTS)" "$generated"/*.rs 2>/dev/null)
  [ -z "$allowing" ]
  rc=$?
  verdict "the generated code allows no safety lint ($generated)" $rc
  [ -n "$allowing" ] && echo "$allowing" | sed 's/^/    | /'
fi

count=$(python3 tests/scripts/unsafe_count.py "$root")
[ "$count" -le "$BUDGET" ]
rc=$?
verdict "unsafe outside wrappers/ and the extern \"C\" entry points: $count lines (budget $BUDGET)" $rc

# Everything outside wrappers/, the extern "C" entry points' bodies included (issue 46: the budget above
# leaves them out): lines, blocks, unsafe fns, unsafe impls. 158 lines when counted first; never raise.
BUDGET_ALL=158
read -r all_lines all_blocks all_fns all_impls < <(python3 tests/scripts/unsafe_count.py --all "$root")
[ "$all_lines" -le "$BUDGET_ALL" ]
rc=$?
verdict "unsafe outside wrappers/, entry points included: $all_lines lines (budget $BUDGET_ALL), $all_blocks blocks, $all_fns unsafe fns, $all_impls unsafe impls" $rc

unguarded=$(python3 tests/scripts/unsafe_count.py --unguarded "$root")
[ -z "$unguarded" ]
rc=$?
verdict "every extern \"C\" entry point runs inside the panic guard (wrappers/src/guard.rs)" $rc
[ -n "$unguarded" ] && echo "$unguarded" | sed 's/^/    | no guard: /'

# The checks can fail: a copy with one root's denial removed, and one with a line of unsafe added.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/wrappers" "$tmp/shim" "$tmp/tools"
cp -r wrappers/src "$tmp/wrappers/" && cp -r shim/src "$tmp/shim/" && cp -r tools/src "$tmp/tools/"
grep -vxF "$DENY" shim/src/lib.rs >"$tmp/shim/src/lib.rs"
[ -n "$(breaches "$tmp")" ]
rc=$?
verdict "the check catches a crate root without the denial" $rc
cp shim/src/lib.rs "$tmp/shim/src/lib.rs"
# An allow split over two lines, as an attribute and as a generator's string continued with `\`.
printf '#[allow(non_snake_case,\n    clippy::missing_safety_doc)]\npub fn sample() {}\n' >"$tmp/shim/src/sample.rs"
breaches "$tmp" | grep -qx 'shim/src/sample.rs: allows a safety lint'
rc=$?
verdict "the check catches an allow of a safety lint split over two lines" $rc
printf '#[allow(clippy::not_unsafe_ptr_arg_deref)]\npub fn sample(p: *const u8) {}\n' >"$tmp/shim/src/sample.rs"
breaches "$tmp" | grep -qx 'shim/src/sample.rs: allows a safety lint'
rc=$?
verdict "the check catches an allow of not_unsafe_ptr_arg_deref" $rc
printf 'const A: &str = "#[allow(non_snake_case, \\\n     clippy::missing_safety_doc)]";\n' >"$tmp/shim/src/sample.rs"
breaches "$tmp" | grep -qx 'shim/src/sample.rs: allows a safety lint'
rc=$?
verdict "the check catches it in a generator's string continued on the next line" $rc
rm -f "$tmp/shim/src/sample.rs"
printf 'pub fn sample() -> u8 {\n    // SAFETY: a sample.\n    unsafe { *std::ptr::null::<u8>() }\n}\n' >"$tmp/shim/src/sample.rs"
more=$(python3 tests/scripts/unsafe_count.py "$tmp")
[ "$more" -eq $((count + 1)) ]
rc=$?
verdict "the count sees one more line of unsafe in a sample ($count -> $more)" $rc
printf 'pub unsafe extern "C" fn sample_entry(p: *const u8) -> u8 {\n    unsafe { *p }\n}\n' >"$tmp/shim/src/sample.rs"
entry=$(python3 tests/scripts/unsafe_count.py "$tmp")
[ "$entry" -eq "$count" ]
rc=$?
verdict "the count leaves an extern \"C\" entry point's body out ($count -> $entry)" $rc
read -r entry_all _ < <(python3 tests/scripts/unsafe_count.py --all "$tmp")
[ "$entry_all" -eq $((all_lines + 2)) ]
rc=$?
verdict "the count of everything sees the entry point's two lines ($all_lines -> $entry_all)" $rc
python3 tests/scripts/unsafe_count.py --unguarded "$tmp" | grep -x 'shim/src/sample.rs:1' >/dev/null
rc=$?
verdict "an entry point without the guard is caught" $rc
exit $failed
