#!/usr/bin/env bash
# Prints the sysfs files bulkmem's Topology::read uses, as a one-file
# snapshot: one "path<TAB>content" line per file (paths relative to /),
# "path/<TAB>" for an empty directory. Send the output with a bug report, or
# add it under crates/bulkmem/tests/fixtures/topology/ to test placement on
# your machine's layout. Needs no privileges.
set -eu
root=${1:-/}
cd "$root"
emit() { [ -r "$1" ] && printf '%s\t%s\n' "$1" "$(tr '\n' ' ' < "$1" | sed 's/ *$//')"; return 0; }
echo "# bulkmem topology snapshot of $(uname -n 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d)"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
emit sys/devices/system/cpu/online
for cpu in sys/devices/system/cpu/cpu[0-9]*; do
  for idx in "$cpu"/cache/index[0-9]*; do
    [ -d "$idx" ] || continue
    for f in level type size shared_cpu_list coherency_line_size; do emit "$idx/$f"; done
  done
  emit "$cpu/topology/thread_siblings_list"
done
for node in sys/devices/system/node/node[0-9]*; do
  [ -d "$node" ] || continue
  for f in cpulist distance meminfo; do emit "$node/$f"; done
done
for hp in sys/kernel/mm/hugepages/hugepages-*; do
  [ -d "$hp" ] && printf '%s/\t\n' "$hp"
done
emit sys/kernel/mm/transparent_hugepage/enabled
