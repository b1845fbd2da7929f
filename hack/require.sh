#!/usr/bin/env bash
# require.sh checks, in seconds and before any long build, the system
# commands `make test` and `make demo` need: redis-server (Argo CD's cache),
# tmux (the interactive form's tests), zsh and bash-completion (the
# completion tests type TAB in bash and zsh), git (the test repository) and kubectl
# (the plugin is run through it); jq and openssl (the README's audit
# recipes, which tests run); the CA bundle of ca-certificates (make image
# puts it in the controller's image). Missing Debian packages are installed with
# apt-get when running as root or with password-less sudo; otherwise it stops
# naming the exact command to run.
set -euo pipefail

declare -A package=([redis-server]=redis-server [tmux]=tmux [zsh]=zsh [bash-completion]=bash-completion [git]=git [jq]=jq [openssl]=openssl [ca-certificates]=ca-certificates)
missing=()
for cmd in redis-server tmux zsh git jq openssl kubectl; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
[ -s /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
[ -f /usr/share/bash-completion/bash_completion ] || missing+=(bash-completion)
[ ${#missing[@]} -eq 0 ] && exit 0

installable=()
for cmd in "${missing[@]}"; do
	if [ "$cmd" = kubectl ]; then
		echo "error: kubectl is not installed: install it as https://kubernetes.io/docs/tasks/tools/ says, then run make again" >&2
		exit 1
	fi
	installable+=("${package[$cmd]}")
done

if [ "$(id -u)" = 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "error: missing ${installable[*]}: run \`sudo apt-get install -y ${installable[*]}\`, then make again" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "error: missing ${installable[*]}: install them with your package manager, then make again" >&2
	exit 1
fi
echo "installing ${installable[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq "${installable[@]}" >/dev/null
