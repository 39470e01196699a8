#!/usr/bin/env bash
# Sets up llama.cpp, the peer of the Llama benchmarks, in .cache/llamacpp
# (never committed):
#
#   node_modules/node-llama-cpp              llama.cpp's Node.js binding (its
#                                            JavaScript API)
#   node_modules/@node-llama-cpp/linux-x64   its prebuilt Linux x64 CPU build:
#                                            the Node addon, libllama and
#                                            libggml with one CPU backend per
#                                            x86 level (sse42 to zen4 and
#                                            sapphirerapids), of which ggml
#                                            loads the best the CPU runs
#
# The tree is pinned by baselines/peers/llamacpp/package.json and
# package-lock.json (every package's version and sha512, which npm checks
# against each tarball) and installed from the npm registry with
# --ignore-scripts: node-llama-cpp's postinstall, which would look for a
# GPU build or compile llama.cpp, never runs, and the driver loads the
# prebuilt binaries only (getLlama build "never"). --omit=optional leaves
# out the CUDA and Vulkan builds, which the lockfile lists as optional.
#
# npm ci refuses this lockfile: node-llama-cpp 3.22.1 names platform
# packages (macOS, Windows, riscv64) that the registry does not have at
# 3.22.1, which a lockfile made on Linux cannot list. npm install with the
# lockfile installs the same tree; the script checks that it left the
# lockfile unchanged (nothing resolved anew) and that the two packages
# are the pinned versions. Quick and silent when everything is current.
#
# Node.js and npm are installed with apt-get (through sudo unless root) if
# missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ZBENCH_LLAMACPP:-$ROOT/.cache/llamacpp}"
SRC="$ROOT/baselines/peers/llamacpp"

# say, die, apt_install, need_node
. "$ROOT/scripts/install-lib.sh"

need_node
major="$(node -p 'process.versions.node.split(".")[0]')"
((major >= 20)) || die "node-llama-cpp needs Node.js 20 or later, this is $(node --version)"

# The install is current when the stamp matches its inputs.
stamp="$(
	sha256sum "$SRC/package.json" "$SRC/package-lock.json" | cut -d' ' -f1
	node --version
)"
if [[ -f "$DEST/.stamp" && "$(cat "$DEST/.stamp")" == "$stamp" && -d "$DEST/node_modules/node-llama-cpp" ]]; then
	exit 0
fi

say "installing node-llama-cpp into ${DEST#"$ROOT/"} from $SRC/package-lock.json"
mkdir -p "$DEST"
rm -f "$DEST/.stamp"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
(cd "$DEST" && npm install --ignore-scripts --omit=optional --no-audit --no-fund \
	--loglevel=error >"$DEST/npm.log" 2>&1) ||
	die "npm install failed: $(tail -n 5 "$DEST/npm.log")"
cmp -s "$SRC/package-lock.json" "$DEST/package-lock.json" ||
	die "npm install changed the lockfile (see diff $SRC/package-lock.json $DEST/package-lock.json): the registry's packages differ from the pinned ones"
for name in node-llama-cpp @node-llama-cpp/linux-x64; do
	want="$(node -p "require('$DEST/package.json').dependencies['$name']")"
	got="$(node -p "require('$DEST/node_modules/$name/package.json').version")"
	[[ "$got" == "$want" ]] || die "$name is $got, want $want"
done
echo "$stamp" >"$DEST/.stamp"
say "installed node-llama-cpp $(node -p "require('$DEST/node_modules/node-llama-cpp/package.json').version") into ${DEST#"$ROOT/"}"
