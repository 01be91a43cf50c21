# Sourced by the tests across simulated hosts (tests/scripts/hosts_*.sh), after they set $root.
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
