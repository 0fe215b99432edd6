#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pair_insn.sh OBJDUMP CPU-FAMILY LIB... - the 16-byte CAS of
# lib/pair_internal.h is the instruction itself in the built library, never
# a call: no libatomic (__atomic_compare_exchange_16, a NEEDED libatomic),
# no __sync_*_16 and no libgcc outline helper (__aarch64_cas16_*, what
# GCC's __sync on __int128 becomes on arm64 by default), and the instruction
# is there:
#   x86_64   LOCK CMPXCHG16B
#   aarch64  CASPAL (LSE) and the LDXP/STLXP loop (ARMv8.0), both, as the
#            library picks one at run time
# Each LIB (the static and the shared library) is checked; a failure names
# the library and the lines found.
set -uo pipefail
objdump=$1 cpu=$2
shift 2
fail=0
for lib in "$@"; do
  dis=$("$objdump" -dr "$lib") || { echo "FAIL: $objdump -dr $lib"; fail=1; continue; }
  calls=$(grep -E '__atomic_compare_exchange_16|__sync_[a-z_]*_16|__aarch64_cas16|__atomic_[a-z_]*_16' <<<"$dis" | head -5)
  if [ -n "$calls" ]; then
    echo "FAIL: $lib calls out for the 16-byte CAS:"
    echo "$calls"
    fail=1
  fi
  if "$objdump" -p "$lib" 2>/dev/null | grep -E 'NEEDED +libatomic' >/dev/null; then
    echo "FAIL: $lib needs libatomic"
    fail=1
  fi
  case $cpu in
  x86_64) want=('lock cmpxchg16b') ;;
  aarch64) want=(caspal ldxp stlxp) ;;
  *) echo "FAIL: no instruction known for $cpu"; exit 1 ;;
  esac
  for insn in "${want[@]}"; do
    n=$(grep -cE "[[:space:]]$insn[[:space:]]" <<<"$dis")
    if [ "$n" -eq 0 ]; then
      echo "FAIL: $lib has no $insn"
      fail=1
    else
      echo "ok: $lib: $n x $insn"
    fi
  done
done
exit $fail
