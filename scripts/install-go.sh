#!/usr/bin/env bash
# Prints the path of a go command new enough for this module (go.mod's go
# line), installing one under .cache/go if the machine has none:
#   1. a go on PATH or in /usr/local/go that is new enough is used as it is;
#   2. otherwise any go (Debian's golang-go is installed if there is none)
#      fetches the official toolchain module golang.org/toolchain from the Go
#      module proxy, the same archive `GOTOOLCHAIN` switching uses, and it is
#      unpacked into .cache/go.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
want=${ZBENCH_GO_VERSION:-1.26.8}
need=$(awk '$1 == "go" {print $2; exit}' "$root/go.mod")

log() { echo "install-go: $*" >&2; }

# version_ge A B: A >= B for dotted versions.
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]; }

go_version() { "$1" env GOVERSION 2>/dev/null | sed 's/^go//'; }

# ZBENCH_GO_FETCH=1 skips the search, to test the download path.
if [ -z "${ZBENCH_GO_FETCH:-}" ]; then
  for cand in "$(command -v go || true)" /usr/local/go/bin/go "$root/.cache/go/bin/go"; do
    [ -n "$cand" ] && [ -x "$cand" ] || continue
    v=$(GOTOOLCHAIN=local go_version "$cand" || true)
    if [ -n "$v" ] && version_ge "$v" "$need"; then
      echo "$cand"
      exit 0
    fi
  done
fi

boot=$(command -v go || true)
[ -n "$boot" ] || { [ -x /usr/local/go/bin/go ] && boot=/usr/local/go/bin/go; } || true
if [ -z "$boot" ]; then
  log "no go command: installing Debian's golang-go to bootstrap"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go >&2
  boot=$(command -v go) || { log "golang-go installed but no go on PATH"; exit 1; }
fi

case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) log "unsupported machine $(uname -m)"; exit 1 ;;
esac
mod="golang.org/toolchain@v0.0.1-go${want}.linux-${arch}"
log "fetching go${want} ($mod) from the module proxy with $boot"
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
dir=$(cd "$tmp" && GOFLAGS=-mod=mod GOMODCACHE="$tmp/mod" GOTOOLCHAIN=local \
  "$boot" mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] || { log "download of $mod failed"; exit 1; }
rm -rf "$root/.cache/go"
mkdir -p "$root/.cache"
cp -R "$dir" "$root/.cache/go"
chmod -R u+w "$root/.cache/go"
# Module zips do not keep file modes: make the commands executable again.
chmod +x "$root/.cache/go/bin/"* "$root/.cache/go/pkg/tool/"*/*
v=$(GOTOOLCHAIN=local go_version "$root/.cache/go/bin/go")
version_ge "$v" "$need" || { log "fetched go $v is older than $need"; exit 1; }
log "installed go $v in .cache/go"
echo "$root/.cache/go/bin/go"
