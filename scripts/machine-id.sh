#!/usr/bin/env bash
# Prints the baseline folder name of this machine, cpu-<cores>core-<isa>
# (e.g. cpu-2core-avx512), so that results are only compared with results
# from the same kind of machine.
set -euo pipefail
cores=$(nproc)
flags=$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo || true)
case " $flags " in
  *" avx512f "*) isa=avx512 ;;
  *" avx2 "*) isa=avx2 ;;
  *" asimd "*) isa=neon ;;
  *) isa=generic ;;
esac
echo "cpu-${cores}core-${isa}"
