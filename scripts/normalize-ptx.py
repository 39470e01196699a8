#!/usr/bin/python3
"""normalize-ptx.py FILE: print PTX with its virtual register numbering made canonical.

nvcc numbers a kernel's virtual registers (%r12, %rd3, %f9830, ...) in an
order that varies from one run to the next on the same input, and declares
each kind with a count (.reg .f32 %f<9832>;) that varies with it. Two PTX
files that differ only in that numbering print the same here: within each
function the registers of every kind declared by a .reg line are renumbered
1, 2, 3, ... in order of first appearance, and the counts of the .reg
declarations become <N>. Everything else (instructions, operands, labels,
special registers such as %tid.x or %envreg3) is printed as it is.
Used by scripts/build-kernels.sh (make kernels, make kernels-verify).
"""

import re
import sys

FUNC = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\b")
DECL = re.compile(r"^(\s*\.reg\s+\.\w+\s+%)([A-Za-z_]\w*?)<\d+>;")
REG = re.compile(r"%([A-Za-z_]+)(\d+)\b")


def normalize(lines):
    kinds = set()  # register kinds declared in the current function
    names = {}  # (kind, number) -> canonical number, per function
    count = {}  # kind -> canonical numbers given so far

    def rename(m):
        kind = m.group(1)
        if kind not in kinds:
            return m.group(0)
        key = (kind, m.group(2))
        if key not in names:
            count[kind] = count.get(kind, 0) + 1
            names[key] = count[kind]
        return "%" + kind + str(names[key])

    for line in lines:
        if FUNC.match(line):
            kinds, names, count = set(), {}, {}
        d = DECL.match(line)
        if d:
            kinds.add(d.group(2))
            yield d.group(1) + d.group(2) + "<N>;" + line[d.end():]
            continue
        yield REG.sub(rename, line) if kinds else line


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: normalize-ptx.py FILE\n")
        return 2
    sys.stdout.reconfigure(encoding="latin-1")
    with open(argv[1], encoding="latin-1") as f:
        sys.stdout.writelines(normalize(f))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
