#!/usr/bin/env bash
# apt-ensure.sh LABEL PACKAGE...: installs the Debian packages that are missing (sudo
# when not root). Idempotent: when all are present it says so without touching apt.
set -euo pipefail
label=$1
shift

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "$label: all $# packages present"
  exit 0
fi

echo "$label: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
