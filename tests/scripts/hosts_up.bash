# Sourced by the tests across simulated hosts (tests/scripts/hosts_*.sh, tests/mpich_builds/*_hosts.sh),
# after they set $root.
hosts=$root/scripts/hosts.sh

# hosts_or_skip: exits 77 (SKIP, with the reason) where hosts cannot be made on this machine.
hosts_or_skip() {
  local why
  why=$("$hosts" check) || { echo "SKIP: no simulated hosts on this machine: $why"; exit 77; }
}

# hosts_up: h1 and h2 up; taken down at exit when this test brought them up (another test's stay).
hosts_up() {
  "$hosts" owns h1 h2 && return
  "$hosts" up 2 || { echo "FAIL scripts/hosts.sh up 2"; exit 1; }
  trap '"$hosts" down' EXIT
}

# build_without_library NAME BUILD: tests/mpich_builds/NAME.c built with BUILD's mpicc alone into
# build/mpich_builds/NAME-BUILD (sets $out and $bin): neither linked with mpixstream nor loading it
# (ldd checks), for the reproducers that show a defect without the library. Exits 1 where it cannot.
build_without_library() {
  mpich_select "$2" || exit 1
  out=$root/build/mpich_builds
  mkdir -p "$out"
  bin=$out/$1-$2
  "$MPICC" -O2 "$root/tests/mpich_builds/$1.c" -o "$bin" || exit 1
  ! ldd "$bin" | grep -q mpixstream || { echo "$bin loads mpixstream"; exit 1; }
}
