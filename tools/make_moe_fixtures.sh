#!/usr/bin/env bash
# Regenerates tests/data/moe/: tiny f32 mixture-of-experts checkpoints written by
# `larql synth` and what tools/moe_reference.py (PyTorch) computes for them. The tests
# compare larql against these files; run this only when the fixtures must change, and
# commit the result. Seeds are chosen so that every layer and position has a gap of at
# least 1e-3 between its k-th and (k+1)-th router logit (reference.json's router_margin):
# top-k is discontinuous, and a near-tie would test rounding, not routing.
#   tools/make_moe_fixtures.sh [path/to/larql]      (needs scripts/install-train-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
larql=${1:-build/larql}
out=tests/data/moe
rm -rf "$out" && mkdir -p "$out"
shape=(--hidden 64 --heads 4 --kv-heads 2 --vocab 256 --context 64 --dtype f32 --layers 3)
tokens=2,5,6,7,40,41,42,43,100,7,8,9

# Mixtral: 4 experts, top-2, one tensor per expert and projection (block_sparse_moe.experts.N.w1).
"$larql" synth --family mixtral --out "$out/mixtral" "${shape[@]}" --ffn 48 --experts 4 --experts-used 2 --seed 11
# Qwen3-MoE: 8 experts of 32, top-3, stacked (transformers v5's experts.gate_up_proj), QK-norm,
# heads of 32, and layer 1 a dense MLP of 96 (mlp_only_layers).
"$larql" synth --family qwen3moe --out "$out/qwen3moe" "${shape[@]}" --head-dim 32 --ffn 96 --expert-ffn 32 --experts 8 \
    --experts-used 3 --stacked-experts --dense-layers 1 --seed 12

# Qwen2-MoE: 8 experts of 32, top-2, weights as the softmax gives them (no norm_topk_prob), one
# tensor per expert, biases on q, k and v, a shared expert of 48 weighted by its sigmoid gate,
# and layer 1 a dense MLP of 96 (mlp_only_layers).
"$larql" synth --family qwen2moe --out "$out/qwen2moe" "${shape[@]}" --ffn 96 --expert-ffn 32 --shared-expert-ffn 48 \
    --experts 8 --experts-used 2 --dense-layers 1 --seed 13

# Gemma 4 26B-A4B kind: a dense MLP of 64 and 8 experts of 32 (top-2) in every layer, gelu_tanh,
# the router on the residual with its own scales; sliding layers 0-2 (window 4), full layer 3
# (heads of 32, one KV head, values = keys); its reference is tools/gemma_reference.py.
"$larql" synth --family gemma4moe --out "$out/gemma4moe" --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --global-head-dim 32 \
    --global-kv-heads 1 --vocab 256 --context 64 --dtype f32 --sliding-window 4 --ffn 64 --layers 4 --final-softcap 3 \
    --expert-ffn 32 --experts 8 --experts-used 2 --seed 18

# GPT-OSS: 4 experts of 64 (top-2) with biases and the clamped SwiGLU, the router's bias,
# attention sinks and biases, sliding layers 0 and 2 (window 4), YaRN RoPE; f32, and the
# same shape with MXFP4 experts as transformers stores them (*_blocks, *_scales).
gpt_oss=(--family gpt-oss --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --vocab 256 --context 64 --sliding-window 4 \
    --layers 3 --ffn 64 --expert-ffn 64 --experts 4 --experts-used 2)
"$larql" synth --out "$out/gptoss" "${gpt_oss[@]}" --dtype f32 --seed 21
"$larql" synth --out "$out/gptoss-mxfp4" "${gpt_oss[@]}" --dtype mxfp4 --seed 21

for m in mixtral qwen3moe qwen2moe gemma4moe gptoss gptoss-mxfp4; do
  reference=tools/moe_reference.py
  [ "$m" = gemma4moe ] && reference=tools/gemma_reference.py
  [ "${m%-mxfp4}" = gptoss ] && reference=tools/gpt_oss_reference.py
  /usr/bin/python3 "$reference" "$out/$m" --tokens "$tokens" --greedy 8 > "$out/$m/reference.json"
  python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['router_margin']; print(sys.argv[1], 'router margin', m); sys.exit(m < 1e-3)" "$out/$m/reference.json"
done
du -sh "$out"/*
