#!/usr/bin/env bash
# Simulated hosts on this machine: each a network namespace with its own address on a bridge of veth
# pairs and its own hostname (a UTS namespace entered at each command), sharing the filesystem, so that
# MPI jobs run across "hosts": shared memory between the ranks of a host, MPICH's netmod (TCP) between
# hosts. Hydra launches ranks into them through scripts/hosts-ssh (an ssh stand-in, no sshd).
#
#   scripts/hosts.sh check          can hosts be made here? prints why not; exit 0 yes, 1 no
#   scripts/hosts.sh up N           hosts h1..hN (idempotent: the same N already up is kept)
#   scripts/hosts.sh down           removes them, killing whatever still runs in them (idempotent)
#   scripts/hosts.sh status         the hosts, their addresses and what shapes their links; exit 1 if none
#   scripts/hosts.sh owns HOST...   exit 0 if every HOST (HOST or HOST:N) is a simulated host that is up
#   scripts/hosts.sh exec HOST CMD...   runs CMD on HOST (its network, hostname and /etc/hosts)
#   scripts/hosts.sh run CMD...     runs an mpiexec command line from the first host, with Hydra's
#                                   launcher (MPICH and Intel MPI) set to scripts/hosts-ssh and the
#                                   netmods' settings for these links (`env`)
#   scripts/hosts.sh env            those settings, KEY=VALUE per line
#   scripts/hosts.sh reap           kills every process left in the hosts (after a killed job)
#   scripts/hosts.sh shape [rate=R] [delay=D] | off
#                                   shapes each host's link (its egress): rate with tbf (e.g. 1gbit),
#                                   delay with netem (e.g. 10us; needs the kernel's sch_netem)
#
# Nothing is routed out: the hosts have one interface (eth0, 10.77.0.K/24 for hK) on a bridge that lives
# in a namespace of its own (mpixs-switch), and no default route; the machine's own namespace is not
# touched. State: the namespaces mpixs-*, /etc/netns/mpixs-*/hosts (ip netns exec puts it over
# /etc/hosts: each host resolves every other by name) and /run/mpixstream-hosts.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
prefix=mpixs
switch=$prefix-switch
subnet=10.77.0
state=/run/mpixstream-hosts
iface=eth0

die() { echo "hosts.sh: $*" >&2; exit 1; }
ns_of() { echo "$prefix-$1"; }
hosts_up() { [ -f "$state/hosts" ] && awk '{print $1}' "$state/hosts"; }

# Why hosts cannot be made here (nothing if they can).
cannot() {
  [ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces)"; return; }
  local t
  for t in ip tc unshare; do command -v $t >/dev/null || { echo "no '$t' (scripts/install.sh installs iproute2)"; return; }; done
  [ -e /proc/self/ns/net ] && [ -e /proc/self/ns/uts ] || { echo "the kernel has no network or UTS namespaces"; return; }
  local probe=$prefix-probe-$$ err
  if ! err=$(ip netns add "$probe" 2>&1); then echo "ip netns add failed: $err"; return; fi
  if ! err=$(ip -n "$probe" link add vtest0 type veth peer name vtest1 2>&1); then
    ip netns del "$probe" 2>/dev/null; echo "no veth pairs: $err"; return
  fi
  if ! err=$(ip -n "$probe" link add brtest type bridge 2>&1); then
    ip netns del "$probe" 2>/dev/null; echo "no bridges: $err"; return
  fi
  # What host_exec does: a hostname (UTS namespace) and a boot id bound over /proc's, in ip netns
  # exec's mount namespace.
  local id
  id=$(mktemp)
  cat /proc/sys/kernel/random/uuid >"$id"
  err=$(ip netns exec "$probe" unshare --uts -- sh -c 'hostname probe && mount --bind "$0" /proc/sys/kernel/random/boot_id' "$id" 2>&1)
  local rc=$?
  rm -f "$id"
  ip netns del "$probe"
  [ $rc -eq 0 ] || echo "cannot enter a host (hostname, boot id): $err"
}

# Kills the processes in the hosts' namespaces: TERM, then KILL what is left after 2 s.
reap() {
  local ns pids sig
  for sig in TERM KILL; do
    pids=""
    for ns in $(ip netns list 2>/dev/null | awk -v p="^$prefix-h[0-9]+$" '$1 ~ p {print $1}'); do
      pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    done
    pids=$(echo $pids)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -$sig $pids 2>/dev/null || true
    [ $sig = TERM ] && sleep 2
  done
}

down() {
  reap
  local ns
  for ns in $(ip netns list 2>/dev/null | awk -v p="^$prefix-" '$1 ~ p {print $1}'); do
    ip netns del "$ns"
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$state" /etc/netns/"$prefix"-*
  rmdir /etc/netns 2>/dev/null || true
}

up() {
  local n=$1 i ns why
  case "$n" in '' | *[!0-9]* | 0) die "up wants a number of hosts (1..250), not '$n'" ;; esac
  [ "$n" -le 250 ] || die "at most 250 hosts"
  why=$(cannot) && [ -z "$why" ] || die "cannot make hosts here: $why"
  # The same hosts already up, every namespace present: nothing to do.
  if [ "$(hosts_up 2>/dev/null | wc -l)" -eq "$n" ]; then
    local ok=1
    for i in $(seq "$n"); do ip netns pids "$(ns_of "h$i")" >/dev/null 2>&1 || ok=0; done
    ip netns pids "$switch" >/dev/null 2>&1 || ok=0
    [ $ok -eq 1 ] && return 0
  fi
  # Anything else (another N, a run killed half-way): from scratch.
  down
  mkdir -p "$state"
  ip netns add "$switch"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  local names=""
  for i in $(seq "$n"); do names+="$subnet.$i h$i"$'\n'; done
  for i in $(seq "$n"); do
    ns=$(ns_of "h$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$switch" link add "p$i" type veth peer name "$iface" netns "$ns"
    ip -n "$switch" link set "p$i" master br0 up
    # IPv4 only: no link-local IPv6 address for a netmod to pick instead.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$ns" addr add "$subnet.$i/24" dev "$iface"
    ip -n "$ns" link set "$iface" up
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s' "$names" >"/etc/netns/$ns/hosts"
    # A boot id of its own: UCX takes two processes with the same boot id for one machine and joins
    # them by shared memory; with this, only the ranks of one host are.
    cat /proc/sys/kernel/random/uuid >"$state/boot_id-h$i"
  done
  for i in $(seq "$n"); do echo "h$i $subnet.$i"; done >"$state/hosts"
}

owns() {
  local h known
  known=$(hosts_up 2>/dev/null) || return 1
  [ $# -gt 0 ] || return 1
  for h in "$@"; do
    grep -qx "${h%%:*}" <<<"$known" || return 1
  done
}

# What the netmods need on these links, KEY=VALUE per line:
#  - UCX: its network devices are eth0 alone (lo has the same address on every host). Its shared-memory
#    transports join only the ranks of one host: each host has a boot id of its own (host_exec).
#  - libfabric (MPICH's ch4:ofi, Intel MPI): the tcp provider on eth0.
#  - Intel MPI: its shared memory within a host, ofi between hosts, on the libfabric of MPICH 5.0.2's
#    wheel (Intel's wheel comes without one: scripts/install.sh).
netenv() {
  echo "UCX_NET_DEVICES=$iface"
  echo "FI_PROVIDER=tcp"
  echo "FI_TCP_IFACE=$iface"
  if [ "${MPICH_NAME:-}" = impi ]; then
    echo "I_MPI_FABRICS=shm:ofi"
    echo "I_MPI_OFI_LIBRARY=$(cd "$here/.." && pwd)/.deps/mpich5/lib/mpich/libfabric.so.1"
  fi
}

host_exec() {
  local h=$1
  shift
  [ $# -gt 0 ] || die "exec $h: no command"
  owns "$h" || die "no simulated host '$h' (scripts/hosts.sh status)"
  # ip netns exec: the host's network, and (in a mount namespace of its own) its /etc/netns files over
  # /etc; unshare --uts: its hostname (MPICH and Hydra tell hosts apart by name); and its boot id.
  exec ip netns exec "$(ns_of "$h")" unshare --uts -- sh -c \
    'hostname "$0" && mount --bind "$1" /proc/sys/kernel/random/boot_id && shift && exec "$@"' \
    "$h" "$state/boot_id-$h" "$@"
}

run() {
  [ $# -gt 0 ] || die "run: no command"
  local first kv envs=()
  first=$(hosts_up | head -1)
  [ -n "$first" ] || die "no simulated hosts (scripts/hosts.sh up N)"
  while read -r kv; do envs+=("$kv"); done < <(netenv)
  # MPICH 5's ch4:ofi settings for one machine (scripts/env.sh) force the netmod between the ranks of a
  # host; here shared memory serves them.
  [[ " ${MPICH_ENV:-} " == *" MPIR_CVAR_NOLOCAL=1 "* ]] && envs=(-u MPIR_CVAR_NOLOCAL "${envs[@]}")
  host_exec "$first" env "${envs[@]}" \
    HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC="$here/hosts-ssh" \
    I_MPI_HYDRA_BOOTSTRAP=ssh I_MPI_HYDRA_BOOTSTRAP_EXEC="$here/hosts-ssh" "$@"
}

status() {
  local h a ns
  [ -f "$state/hosts" ] || { echo "no simulated hosts"; return 1; }
  while read -r h a; do
    ns=$(ns_of "$h")
    printf '%-4s %-12s %s\n' "$h" "$a" "$(tc -n "$ns" qdisc show dev "$iface" 2>/dev/null | head -1)"
  done <"$state/hosts"
}

shape() {
  local rate="" delay="" arg h ns err
  [ -f "$state/hosts" ] || die "no simulated hosts (scripts/hosts.sh up N)"
  for arg in "$@"; do
    case "$arg" in
      rate=*) rate=${arg#rate=} ;;
      delay=*) delay=${arg#delay=} ;;
      off) ;;
      *) die "shape: rate=RATE, delay=DELAY or off, not '$arg'" ;;
    esac
  done
  for h in $(hosts_up); do
    ns=$(ns_of "$h")
    tc -n "$ns" qdisc del dev "$iface" root 2>/dev/null || true
    [ -z "$rate$delay" ] && continue
    if [ -n "$delay" ]; then
      err=$(tc -n "$ns" qdisc add dev "$iface" root handle 1: netem delay "$delay" ${rate:+rate "$rate"} 2>&1) ||
        die "shape: netem on $h failed ($err): this kernel has no sch_netem$(zcat /proc/config.gz 2>/dev/null | grep -q '^# CONFIG_NET_SCH_NETEM is not set' && echo ' (CONFIG_NET_SCH_NETEM is not set)'); rate=R alone uses tbf"
    else
      # A burst of 64 KiB: one TSO segment passes whole at any rate used here.
      tc -n "$ns" qdisc add dev "$iface" root handle 1: tbf rate "$rate" burst 64kb latency 50ms
    fi
  done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  check) why=$(cannot); [ -z "$why" ] || { echo "$why"; exit 1; } ;;
  up) [ $# -eq 1 ] || die "usage: scripts/hosts.sh up N"; up "$1" ;;
  down) down ;;
  status) status ;;
  owns) owns "$@" ;;
  exec) [ $# -ge 2 ] || die "usage: scripts/hosts.sh exec HOST CMD..."; host_exec "$@" ;;
  run) run "$@" ;;
  env) netenv ;;
  reap) reap ;;
  shape) shape "$@" ;;
  -h | --help | "") sed -n '2,/^set /p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; [ -n "$cmd" ] ;;
  *) die "unknown command '$cmd' (scripts/hosts.sh --help)" ;;
esac
