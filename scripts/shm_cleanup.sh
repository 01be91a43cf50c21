#!/usr/bin/env bash
# Removes MPICH shared-memory segments (/dev/shm/mpich_*) that no live process maps or holds open.
# A rank killed by a test's timeout leaves its segments behind; enough of them fill /dev/shm, and then
# every later MPI job dies (the kernel's OOM killer counts tmpfs pages). Run after a killed job.
shopt -s nullglob
in_use=$(cat /proc/[0-9]*/maps 2>/dev/null | awk '$6 ~ /^\/dev\/shm\/mpich_/ {print $6}' | sort -u)
open=$(ls -l /proc/[0-9]*/fd 2>/dev/null | awk '$NF ~ /^\/dev\/shm\/mpich_/ {print $NF}' | sort -u)
removed=0
for f in /dev/shm/mpich_*; do
  if ! grep -qxF "$f" <<<"$in_use"$'\n'"$open"; then
    rm -f "$f" && removed=$((removed + 1))
  fi
done
[ "${1:-}" = -v ] && echo "shm_cleanup: removed $removed stale MPICH segment(s)"
exit 0
