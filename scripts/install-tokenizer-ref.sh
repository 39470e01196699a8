#!/usr/bin/env bash
# Sets up the references the tokenizer tests compare with, in
# .cache/tokenizer-ref (never committed: the Llama 2 vocabulary is Meta's):
#
#   node_modules/tokenizers          Hugging Face's tokenizers library for
#                                    Node (its native binaries included), the
#                                    reference for tokenizer.json
#   node_modules/llama-tokenizer-js  the Llama 2 vocabulary and merges, as
#                                    data inside a JavaScript file
#   llama2/tokenizer.json            Llama 2's tokenizer.json, rebuilt from
#   llama2/tokenizer_config.json     that data (the layout of the Hugging Face
#                                    checkpoints of Llama 2 and TinyLlama)
#   llama2/expected.json             what tokenizers encodes and decodes with
#                                    it, for the cases of
#                                    testdata/reference/tokenizer_cases.json
#
# The packages come from the npm registry with `npm pack`, pinned by version
# and checked against their sha512; llama2/ is built by
# testdata/reference/tokenizer.mjs and rebuilt whenever that script, the
# cases or the packages change. Quick and silent when everything is current.
#
# With --golden, it also installs Debian's python3-sentencepiece, which
# testdata/reference/tokenizer.py (make golden) needs.
#
# Node.js and npm are installed with apt-get (through sudo unless root) if
# missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REF="${ZBENCH_TOKENIZER_REF:-$ROOT/.cache/tokenizer-ref}"
SCRIPT="$ROOT/testdata/reference/tokenizer.mjs"
CASES="$ROOT/testdata/reference/tokenizer_cases.json"

# name version sha512 (the registry's dist.integrity)
PACKAGES=(
	"tokenizers 0.23.2 sha512-OS99VXTXuGuyUncICcS0hEawgKQlrFVKNU+UlzRsTN03RpOeJiCmcai5nKg3JrdIvUDo7/RC5puVEjlJd2e5oA=="
	"llama-tokenizer-js 1.2.2 sha512-Wmth393dc3odWU3IzARJ3r2oIfWgw9GdJ5Gm+hGhfECNO18UHLRqEFSf511jn4E9KcQGzuuKw4Wl08pHAemLAw=="
)

# say, die, apt_install, need_node
. "$ROOT/scripts/install-lib.sh"

golden=
case "${1:-}" in
"") ;;
--golden) golden=1 ;;
*) die "usage: $0 [--golden]" ;;
esac

need_node
if [[ -n "$golden" ]] && ! /usr/bin/python3 -c 'import sentencepiece' >/dev/null 2>&1; then
	apt_install python3-sentencepiece
fi

mkdir -p "$REF/npm" "$REF/node_modules"
stamp_input=""
for entry in "${PACKAGES[@]}"; do
	read -r name version integrity <<<"$entry"
	dir="$REF/node_modules/$name"
	stamp_input+="$name@$version $integrity"$'\n'
	if [[ -f "$dir/.integrity" && "$(cat "$dir/.integrity")" == "$integrity" ]]; then
		continue
	fi
	tgz="$REF/npm/$name-$version.tgz"
	if [[ ! -f "$tgz" ]]; then
		say "npm pack $name@$version"
		(cd "$REF/npm" && npm pack --silent "$name@$version" >/dev/null 2>"$REF/npm/pack.log") ||
			die "npm pack $name@$version failed: $(tail -n 3 "$REF/npm/pack.log")"
	fi
	got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
	if [[ "$got" != "$integrity" ]]; then
		rm -f "$tgz"
		die "$name-$version.tgz has $got, want $integrity"
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	tar -xzf "$tgz" -C "$dir" --strip-components=1
	echo "$integrity" >"$dir/.integrity"
	say "unpacked $name@$version into ${dir#"$ROOT/"}"
done

# llama2/ is current when the stamp matches its inputs.
stamp="$(
	printf '%s' "$stamp_input"
	sha256sum "$SCRIPT" "$CASES" | cut -d' ' -f1
	node --version
)"
out="$REF/llama2"
if [[ -f "$out/expected.json" && -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" ]]; then
	exit 0
fi
say "building ${out#"$ROOT/"} with testdata/reference/tokenizer.mjs"
rm -rf "$out.tmp"
ZBENCH_TOKENIZER_REF="$REF" node "$SCRIPT" --llama2 "$out.tmp" >&2
echo "$stamp" >"$out.tmp/.stamp"
rm -rf "$out"
mv "$out.tmp" "$out"
