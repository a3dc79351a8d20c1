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
  libsimde-dev                         # the tests' emulation of the AVX-512 kernels
  openssl python3                      # TLS test certificates; the test summary and bench scripts
  help2man systemd                     # make package: the man page; the units checked by systemd-analyze
  chromium                             # the page tests (tests/web), headless
  curl git                             # the docs' runnable examples and their check (make docs-check)
)
# Node.js and npm run the reference JavaScript tokenizers (and, later, the OpenAI client)
# in the tests. A machine that already has both (e.g. from NodeSource) keeps them: Debian's
# npm package would pull Debian's nodejs over them.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

exec bash "$(dirname "$0")/apt-ensure.sh" "deps" "${packages[@]}"
