#!/usr/bin/env bash
# Installs what tools/train_demo_model.py needs: Debian's PyTorch, the threaded
# OpenBLAS it should use (without it torch falls back to the reference BLAS and
# trains about 10x slower), the King James Bible text used as the corpus and
# `bible`, the program that reads its compressed data file.
# Training is not part of the build or CI; only `make train-demo-model` calls this.
set -euo pipefail

packages=(python3 python3-torch python3-numpy libopenblas0-pthread bible-kjv bible-kjv-text)

exec bash "$(dirname "$0")/apt-ensure.sh" "train deps" "${packages[@]}"
