# Shared by the install scripts that source it: messages named after the
# script, apt-get through sudo unless root, and Node.js with npm.
# Sourced, not run; the caller sets `set -euo pipefail`.

# NAME is the calling script's name, without its .sh, for its messages.
NAME="$(basename "$0" .sh)"

say() { echo "$NAME: $*" >&2; }
die() {
	say "$*"
	exit 1
}

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# apt_install installs Debian packages quietly, updating the package lists
# once if the first try fails.
apt_install() {
	local sudo=()
	if ! is_root; then
		command -v sudo >/dev/null || die "need root or sudo to install $*"
		sudo=(sudo)
	fi
	say "installing $* with apt-get"
	if ! "${sudo[@]}" apt-get install -y -qq "$@" >/dev/null 2>&1; then
		"${sudo[@]}" apt-get update -qq >/dev/null 2>&1 || true
		"${sudo[@]}" apt-get install -y -qq "$@" >/dev/null || die "apt-get install $* failed"
	fi
}

# need_node installs Node.js and npm with apt-get where either is missing.
need_node() {
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		apt_install nodejs npm
	fi
}
