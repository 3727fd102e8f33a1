#!/bin/sh
# Installs what building and testing rlock needs on Debian 12, as root. Installs only what is
# missing, with one `apt-get update` when anything is.
set -eu

packages="cmake ninja-build g++ pkg-config libcli11-dev libhiredis-dev nlohmann-json3-dev
libtomlplusplus-dev doctest-dev libssl-dev redis-server redis-tools redis-sentinel python3
procps bash-completion zsh fish mandoc groff-base openssl file rpm git man-db iproute2 clang
libclang-rt-14-dev dpkg-dev lua5.1 tmux haproxy nutcracker libfaketime cron lintian"

missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
