#!/usr/bin/env bash
# Regenerates tests/data/gemma/: four tiny f32 Gemma checkpoints written by `larql synth`
# and what tools/gemma_reference.py (PyTorch) computes for them. The tests compare larql
# against these files; run this only when the fixtures must change, and commit the result.
#   tools/make_gemma_fixtures.sh [path/to/larql]      (needs scripts/install-train-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
larql=${1:-build/larql}
out=tests/data/gemma
rm -rf "$out" && mkdir -p "$out"
shape=(--hidden 64 --heads 4 --kv-heads 2 --head-dim 24 --vocab 256 --context 64 --dtype f32 --sliding-window 4)

# Gemma 2: small soft caps so that they matter; query_pre_attn_scalar = hidden / heads
# (as the 27B has it), not head_dim, so that the score scale is not the default.
"$larql" synth --family gemma2 --out "$out/gemma2" "${shape[@]}" --ffn 64 --layers 4 --attention-softcap 4 --final-softcap 5 --seed 2
python3 - "$out/gemma2/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["query_pre_attn_scalar"] = c["hidden_size"] // c["num_attention_heads"]
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
# Gemma 3: full layer 5 between sliding ones, linear RoPE scaling on it, a sequence three
# windows long.
"$larql" synth --family gemma3 --out "$out/gemma3" "${shape[@]}" --ffn 64 --layers 8 --seed 3
# Gemma 4 (dense): full layers 5 and 7 (the last is always full) with heads of 32 instead
# of 16, one KV head instead of two, values = keys, proportional RoPE on 4 of their 16
# pairs; a small final cap so that it matters.
"$larql" synth --family gemma4 --out "$out/gemma4" --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --global-head-dim 32 \
    --global-kv-heads 1 --vocab 256 --context 64 --dtype f32 --sliding-window 4 --ffn 64 --layers 8 --final-softcap 3 --seed 4
# Gemma 4 E model: per-layer embeddings of 8, the last 3 of 10 layers KV-shared (types
# S S S S S F S S S F: shared layers 7, 8 read layer 6, layer 9 reads layer 5, where llama.cpp's
# hard-coded first−2 / first−1 would pick the wrong ones), their FFN double-wide (E2B's).
"$larql" synth --family gemma4 --out "$out/gemma4e" --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --global-head-dim 32 \
    --global-kv-heads 1 --vocab 256 --context 64 --dtype f32 --sliding-window 4 --ffn 64 --layers 10 --final-softcap 3 \
    --ple 8 --kv-shared 3 --double-wide --seed 5

/usr/bin/python3 tools/gemma_reference.py "$out/gemma2" --tokens 2,5,6,7,40,41,42,43,100,7 --greedy 8 > "$out/gemma2/reference.json"
/usr/bin/python3 tools/gemma_reference.py "$out/gemma3" --tokens 2,5,6,7,40,41,42,43,100,7,8,9 --greedy 8 > "$out/gemma3/reference.json"
/usr/bin/python3 tools/gemma_reference.py "$out/gemma4" --tokens 2,5,6,7,40,41,42,43,100,7,8,9 --greedy 8 > "$out/gemma4/reference.json"
/usr/bin/python3 tools/gemma_reference.py "$out/gemma4e" --tokens 2,5,6,7,40,41,42,43,100,7,8,9 --greedy 8 > "$out/gemma4e/reference.json"
du -sh "$out"/*
