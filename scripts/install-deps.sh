#!/usr/bin/env bash
# Installs nibble's build dependencies from Debian packages (skips what is already there).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev
      libcpp-httplib-dev libpcre2-dev libsentencepiece-dev libgtest-dev libgmock-dev
      libbenchmark-dev libomp-dev python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
