#!/usr/bin/env bash
# build.sh TOOLMOD NAME=PKG... builds the pinned commands of module hack/tools/TOOLMOD
# into a cache outside the repo, keyed by the module's go.mod, go.sum, optional
# ldflags file and the Go version, and prints the directory holding the
# binaries. Binaries already in the cache are not rebuilt, so fresh clones on
# the same machine reuse them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mod=$1
shift
dir="$here/$mod"
ldflags="-s -w"
if [ -f "$dir/ldflags" ]; then
	ldflags="$ldflags $(cat "$dir/ldflags")"
fi
# A module may name the Go toolchain it needs (Argo CD 3.x needs a newer Go
# than the product module); the go command fetches it from the module proxy.
toolchain=${GOTOOLCHAIN:-local}
if [ -f "$dir/toolchain" ]; then
	toolchain=$(cat "$dir/toolchain")
fi
goversion=$(cd "$dir" && GOTOOLCHAIN=$toolchain go env GOVERSION)
# A module may hold commands of its own (hack/tools/image's build-image):
# their sources are part of the key. tools.go only records imports, so the
# keys of modules without such commands are what they were.
own=$(cd "$dir" && find . -name '*.go' ! -name tools.go | LC_ALL=C sort)
key=$( (cat "$dir/go.mod" "$dir/go.sum"; echo "$ldflags"; echo "$goversion"; if [ -n "$own" ]; then (cd "$dir" && cat $own); fi) | sha256sum | cut -c1-16)
out="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-gitops/tools/$mod-$key"
seconds="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-gitops/tools/build-seconds"
mkdir -p "$out"
for spec in "$@"; do
	name=${spec%%=*}
	pkg=${spec#*=}
	if [ ! -x "$out/$name" ]; then
		# One line before the silence of a long build: what, and how long
		# it took last time here (else on CI's 2 cores, hack/tools/build-seconds).
		last=$(awk -v k="$mod/$name" '$1 == k {s = $2} END {print s}' "$seconds" 2>/dev/null || true)
		took="last time here"
		if [ -z "$last" ]; then
			last=$(awk -v k="$mod/$name" '$1 == k {print $2}' "$here/build-seconds")
			took="on 2 cores"
		fi
		about="several minutes"
		if [ -n "$last" ]; then
			about="about $(((last + 59) / 60)) min $took"
		fi
		echo "building $mod/$name with $goversion ($about; once, cached afterwards)" >&2
		start=$SECONDS
		(cd "$dir" && GOTOOLCHAIN=$toolchain CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$out/$name.tmp" "$pkg")
		mv "$out/$name.tmp" "$out/$name"
		echo "$mod/$name $((SECONDS - start))" >>"$seconds"
		echo "built $mod/$name in $((SECONDS - start)) s" >&2
	fi
done
echo "$out"
