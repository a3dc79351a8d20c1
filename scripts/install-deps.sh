#!/usr/bin/env bash
# Installs every Debian package larql needs to build, test, fuzz and benchmark.
# Idempotent: packages already present are skipped without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  clang-14 libclang-rt-14-dev          # libFuzzer and sanitizer runtimes
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libcpp-httplib-dev libboost-dev libssl-dev zlib1g-dev libbrotli-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libutf8proc-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
