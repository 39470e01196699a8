"""Writing the files a reference script makes, and its --check: shared by
the reference scripts here (no torch needed)."""

import argparse
import os
import sys


def is_current(path, data):
    """Whether the file at path holds exactly data (--check)."""
    try:
        with open(path, "rb") as f:
            return f.read() == data
    except FileNotFoundError:
        return False


def write_file(path, data):
    """Writes data to path through a temporary file, making its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main(doc, build, repo, script):
    """A reference script's command line: writes the files build() returns
    ({path relative to repo: bytes}) or, with --check, exits 1 naming those
    the committed files do not hold exactly. Returns the exit status."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 unless the committed files hold exactly this output")
    args = ap.parse_args()
    files = build()
    stale = []
    for rel, data in files.items():
        path = os.path.join(repo, rel)
        if args.check:
            if not is_current(path, data):
                stale.append(rel)
            continue
        write_file(path, data)
        print(f"wrote {rel}: {len(data)} bytes")
    if stale:
        print(f"stale: {', '.join(stale)}: regenerate with /usr/bin/python3 {script}", file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(files)} files current ({sum(len(d) for d in files.values())} bytes)")
    return 0
