#!/usr/bin/env bash
# Installs what tools/train_demo_model.py needs: Debian's PyTorch, the threaded
# OpenBLAS it should use (without it torch falls back to the reference BLAS and
# trains about 10x slower) the King James Bible text used as the corpus and
# `bible`, the program that reads its compressed data file.
# Training is not part of the build or CI; only `make train-demo-model` calls this.
set -euo pipefail

packages=(python3 python3-torch python3-numpy libopenblas0-pthread bible-kjv bible-kjv-text)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "train deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "train deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
