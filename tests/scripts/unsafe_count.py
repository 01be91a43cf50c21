#!/usr/bin/env python3
"""Counts `unsafe` in the code outside wrappers/ and outside the `extern "C"` entry points (the unsafe
rule, docs/architecture.md): every line of shim/src and tools/src with the word `unsafe` in code (not a
comment), less the lines inside an `extern "C" fn` definition (its signature and body), less test code
(`tests.rs` files and `#[cfg(test)]` modules). Prints `COUNT` and, with -v, each line counted.
With --all, counts the entry points' lines too and prints `LINES BLOCKS FNS IMPLS`: the lines with
`unsafe` in all non-test code outside wrappers/ (extern "C" bodies included), the `unsafe {` blocks, the
`unsafe fn` definitions (entry points included), the `unsafe impl`s.
With --unguarded, prints instead each entry point whose body does not run inside the panic guard
(`ffi_guard`, `guard_with`, or a path that calls it: the runtime's `mpix_entry` / `standard_entry`, the
enqueue API's `enqueue!`), one per line.

usage: unsafe_count.py [-v | --all | --unguarded] ROOT
"""
import os
import re
import sys

ENTRY = re.compile(r'\bextern\s+"C"\s+fn\s+[\w$]')  # a definition: `extern "C" fn NAME`
FN_TYPE = re.compile(r'\bunsafe\s+extern\s+"C"\s+fn\s*\(')  # a function-pointer type: not unsafe code
WORD = re.compile(r'\bunsafe\b')
# The guard, and the project's paths that run their body inside it: the runtime's `mpix_entry` and
# `standard_entry`, the enqueue API's one path (`enqueue!` -> `mpix_entry`).
GUARD = re.compile(r'\b(ffi_guard|guard_with|mpix_entry|standard_entry|enqueue!)\s*(::<[^>]*>)?\(')


def code_of(line):
    """The line without its comment and string literals (roughly: enough for `unsafe` and braces)."""
    line = re.sub(r'"(\\.|[^"\\])*"', lambda m: m.group(0) if m.group(0) == '"C"' else '""', line)
    return line.split('//', 1)[0]


def count_file(path, entries=None, with_entries=False):
    """The counted lines of `path` (`with_entries`: the entry points' too); each entry point's (line,
    guarded) appended to `entries`."""
    counted = []
    entry_line, entry_text = None, ''

    depth = 0
    entry_depth = None  # depth at which the current entry point's body closes
    pending_entry = False  # an entry point's signature seen, its body's brace not yet
    test_depth = None
    cfg_test = False
    with open(path, encoding='utf-8') as f:
        for number, raw in enumerate(f, 1):
            code = FN_TYPE.sub('extern "C" fn(', code_of(raw))
            stripped = code.strip()
            if stripped.startswith('#[cfg(test)]'):
                cfg_test = True
            elif cfg_test and re.match(r'(pub(\(crate\))?\s+)?mod\s+\w+', stripped):
                test_depth = depth
                cfg_test = False
            elif stripped and not stripped.startswith('#['):
                cfg_test = False
            if ENTRY.search(code) and entry_depth is None and not pending_entry:
                pending_entry = True
                entry_line, entry_text = number, ''
            if entry_depth is not None or pending_entry:
                entry_text += code
            inside = test_depth is not None or (not with_entries and (entry_depth is not None or pending_entry))
            if WORD.search(code) and not inside:
                counted.append((number, raw.rstrip()))
            for ch in code:
                if ch == '{':
                    if pending_entry:
                        entry_depth = depth
                        pending_entry = False
                    depth += 1
                elif ch == '}':
                    depth -= 1
                    if entry_depth is not None and depth == entry_depth:
                        entry_depth = None
                        if entries is not None and test_depth is None:
                            entries.append((entry_line, bool(GUARD.search(entry_text))))
                    if test_depth is not None and depth == test_depth:
                        test_depth = None
            if pending_entry and code.rstrip().endswith(';'):
                pending_entry = False  # a declaration without a body
    return counted


def main():
    args = sys.argv[1:]
    verbose = '-v' in args
    unguarded = '--unguarded' in args
    everything = '--all' in args
    args = [a for a in args if a not in ('-v', '--unguarded', '--all')]
    blocks = fns = impls = 0
    root = args[0] if args else '.'
    total = 0
    for top in ('shim/src', 'tools/src'):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith('.rs') or name == 'tests.rs':
                    continue
                path = os.path.join(dirpath, name)
                entries = []
                lines = count_file(path, entries, everything)
                if unguarded:
                    for number, guarded in entries:
                        if not guarded:
                            print(f'{os.path.relpath(path, root)}:{number}')
                    continue
                for number, line in lines:
                    total += 1
                    code = code_of(line)
                    blocks += len(re.findall(r'\bunsafe\s*\{', code))
                    fns += len(re.findall(r'\bunsafe\s+(extern\s+"C"\s+)?fn\s+\w', code))
                    impls += len(re.findall(r'\bunsafe\s+impl\b', code))
                    if verbose:
                        print(f'{os.path.relpath(path, root)}:{number}: {line.strip()}')
    if everything:
        print(total, blocks, fns, impls)
    elif not unguarded:
        print(total)


if __name__ == '__main__':
    main()
