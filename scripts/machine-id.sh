#!/usr/bin/env bash
# Prints the baseline folder name of this machine,
#   cpu-<model>-f<family>-<cores>core-<isa>
# e.g. cpu-intel-xeon-f6-2core-amx or cpu-amd-epyc-f25-2core-avx2, so that
# results are only compared with results from the same kind of machine:
#   <model>   the CPU's model name as a slug, vendor first ("Intel(R) Xeon(R)
#             Platinum 8480+" is intel-xeon-platinum-8480; trademarks, "CPU",
#             "Processor", "N-Core" and the clock are left out)
#   f<family> the CPU family number (x86 "cpu family"; arm64 "CPU part")
#   <cores>   online CPUs
#   <isa>     the widest vector or matrix extension: amx, avx512, avx2, neon
#             or generic
# ZBENCH_CPUINFO and ZBENCH_NPROC replace /proc/cpuinfo and nproc (tests).
set -euo pipefail
cpuinfo=${ZBENCH_CPUINFO:-/proc/cpuinfo}
cores=${ZBENCH_NPROC:-$(nproc)}

# field NAME: the value of the first "NAME : value" line of cpuinfo.
field() {
  awk -F: -v k="$1" '{ n = $1; gsub(/^[ \t]+|[ \t]+$/, "", n) }
    n == k { v = substr($0, index($0, ":") + 1); gsub(/^[ \t]+|[ \t]+$/, "", v); print v; exit }' "$cpuinfo"
}

flags=" $(field flags) $(field Features) "
case "$flags" in
  *" amx_bf16 "*) isa=amx ;;
  *" avx512f "*) isa=avx512 ;;
  *" avx2 "*) isa=avx2 ;;
  *" asimd "*) isa=neon ;;
  *) isa=generic ;;
esac

case "$(field vendor_id)" in
  GenuineIntel) vendor=intel ;;
  AuthenticAMD) vendor=amd ;;
  "") vendor=$(field "CPU implementer") ;;
  *) vendor=$(field vendor_id) ;;
esac
family=$(field "cpu family")
[ -n "$family" ] || family=$(field "CPU part")

model=$(field "model name" | tr '[:upper:]' '[:lower:]' |
  sed -E 's/\((r|tm)\)//g; s/@.*//; s/[0-9]+-core//g; s/\b(cpu|processor)\b//g; s/[^a-z0-9]+/-/g; s/^-+|-+$//g')
vendor=$(printf '%s' "$vendor" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9]+/-/g; s/^-+|-+$//g')
case "$model" in
  "") model=${vendor:-unknown} ;;
  "$vendor" | "$vendor"-*) ;;
  *) [ -z "$vendor" ] || model=$vendor-$model ;;
esac
echo "cpu-${model}-f${family:-0}-${cores}core-${isa}"
