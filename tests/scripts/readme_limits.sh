#!/usr/bin/env bash
# The user documentation stays short and its links stay true:
#   1. README.md has at most 200 lines;
#   2. every relative link in README.md and docs/*.md resolves: the file or folder exists, and an
#      #anchor into a markdown file (or into the same file) names one of its headings, computed the
#      GitHub way (lower-case; punctuation removed, letters, digits, '_', '-' and spaces kept; spaces to
#      '-'; a repeated heading gets -1, -2, ...). Links inside code (fenced blocks, `spans`) are not links.
# Then the test proves that it can fail: a README of 201 lines, a missing file and a wrong anchor in a
# scratch copy must each be caught.
# Usage: tests/scripts/readme_limits.sh [ROOT]   (default: this checkout). Prints PASS/FAIL per check;
# exits 1 if any failed.
set -uo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
max_lines=200
failed=0
verdict() { if [ "$1" -eq 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=1; fi; }

# check_links ROOT: prints one line per broken link ("FILE:LINE: TARGET: why"); returns 1 if any.
check_links() {
  python3 - "$1" <<'EOF'
import os, re, sys, glob, unicodedata
root = sys.argv[1]

def strip_code(line):
    return re.sub(r"`+[^`]*`+", "", line)

def slug(heading):
    text = re.sub(r"<[^>]+>", "", heading.strip())            # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)      # links: their text
    text = text.lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN" or cat == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")

anchor_cache = {}
def anchors(path):
    if path not in anchor_cache:
        seen, result, fence = {}, set(), None
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^\s*(`{3,}|~{3,})", line)
                if m:
                    mark = m.group(1)[0]
                    fence = None if fence == mark else (fence or mark)
                    continue
                if fence:
                    continue
                h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if not h:
                    continue
                s = slug(h.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                result.add(s if n == 0 else f"{s}-{n}")
        anchor_cache[path] = result
    return anchor_cache[path]

files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
link = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
bad = count = 0
for md in files:
    if not os.path.exists(md):
        continue
    fence = None
    with open(md, encoding="utf-8") as f:
        for num, line in enumerate(f, 1):
            m = re.match(r"^\s*(`{3,}|~{3,})", line)
            if m:
                mark = m.group(1)[0]
                fence = None if fence == mark else (fence or mark)
                continue
            if fence:
                continue
            for target in link.findall(strip_code(line)):
                count += 1
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, mailto:, ...
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                where = f"{os.path.relpath(md, root)}:{num}: {target}"
                if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep) and dest != root:
                    print(f"{where}: leaves the repository"); bad += 1; continue
                if not os.path.exists(dest):
                    print(f"{where}: no such file"); bad += 1; continue
                if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    print(f"{where}: no heading with anchor #{anchor} in {os.path.relpath(dest, root)}"); bad += 1
print(f"    {len(files)} files, {count} links, {bad} broken")
sys.exit(1 if bad else 0)
EOF
}

# check_lines ROOT: README.md has at most max_lines lines.
check_lines() { [ "$(wc -l <"$1/README.md")" -le $max_lines ]; }

check_lines "$root"; verdict $? "README.md has $(wc -l <"$root/README.md") lines (at most $max_lines)"
check_links "$root"; verdict $? "every relative link and #anchor in README.md and docs/*.md resolves"

# The test can fail: a scratch copy with one defect of each kind.
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/docs"
{ echo "# Title"; echo "## Two words"; echo "## Two words"; echo "See [a](#two-words-1) and [b](docs/x.md#a-b-c)."
  echo '`[not a link](nowhere.md)`'; } >"$scratch/README.md"
printf '# x\n## A, b: `c`\n' >"$scratch/docs/x.md"
check_links "$scratch" >/dev/null 2>&1; verdict $? "a scratch copy whose links all resolve passes (duplicate heading -1, punctuation, code span)"
echo "[gone](docs/missing.md)" >>"$scratch/README.md"
! check_links "$scratch" >/dev/null 2>&1; verdict $? "a link to a missing file is caught"
sed -i '$d' "$scratch/README.md"; echo "[wrong](docs/x.md#a-b-d)" >>"$scratch/README.md"
! check_links "$scratch" >/dev/null 2>&1; verdict $? "a link to a missing anchor is caught"
sed -i '$d' "$scratch/README.md"
check_lines "$scratch"; verdict $? "a README of $(wc -l <"$scratch/README.md") lines passes"
seq $((max_lines + 1 - $(wc -l <"$scratch/README.md"))) >>"$scratch/README.md"
! check_lines "$scratch"; verdict $? "a README of $((max_lines + 1)) lines is caught"

exit $failed
