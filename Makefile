# larql: the one entry point for building, testing and benchmarking (see README).
SHELL := /bin/bash
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 15

SYNTH_085B := build/models/synth-0.85b-bf16
SYNTH_085B_Q8 := build/models/synth-0.85b-q8_0
SYNTH_085B_Q4KM := build/models/synth-0.85b-q4_k_m
SYNTH_085B_Q5KM := build/models/synth-0.85b-q5_k_m
SYNTH_G3_27B := build/models/synth-gemma3-27b-width-4l
SYNTH_G4_31B := build/models/synth-gemma4-31b-width-4l
SYNTH_QWEN3_MOE := build/models/synth-qwen3-30b-a3b-width-12l

.PHONY: all deps build package test test-unit docs-check test-asan fuzz bench bench-engine bench-gguf bench-moe bench-remote bench-gemma bench-wire synth-085b demo train-demo-model train-demo-moe-model train-demo-draft-model clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build build -j $(JOBS)

# A Debian package of the release build (build/larql_VERSION_ARCH.deb): the binary, the demo
# models, a man page and the systemd units (scripts/make-package.sh).
package: build
	@bash scripts/make-package.sh build

# Everything CI runs: the normal build and all its tests, all tests again under ASan+UBSan
# (the integration tests then start sanitized servers and routers), each fuzz target for
# FUZZ_SECONDS, and last one line counting every test of both builds; each phase prints
# its wall time ("== phase NAME: N s"). A skipped test fails
# `make test` (scripts/test_summary.py) unless LARQL_ALLOW_SKIPS=1 is set on purpose.
test:
	@bash scripts/timed.sh build $(MAKE) --no-print-directory build
	@bash scripts/install-js-tokenizers.sh
	@bash scripts/timed.sh tests $(MAKE) --no-print-directory test-unit
	@bash scripts/timed.sh docs $(MAKE) --no-print-directory docs-check
	@bash scripts/timed.sh asan $(MAKE) --no-print-directory test-asan
	@bash scripts/timed.sh fuzz $(MAKE) --no-print-directory fuzz
	@python3 scripts/test_summary.py build/test-results build-asan/test-results

# The release build's tests alone.
test-unit: build
	$(call run_tests,build)

# README.md and docs/: runnable examples run, links resolve, no development-process words.
docs-check: build
	python3 scripts/check_docs.py

test-asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLARQL_SANITIZE=ON -DLARQL_BENCH=OFF -DLARQL_EMULATED_AVX512=OFF
	cmake --build build-asan -j $(JOBS)
	$(call run_tests,build-asan)

# ctest in build folder $(1); each test also writes a JSON report there for the summary.
define run_tests
	rm -rf $(1)/test-results
	ctest --test-dir $(1) --output-on-failure -j $(JOBS)
endef

fuzz: deps
	CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLARQL_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS)
	@bash scripts/run-fuzz.sh build-fuzz $(FUZZ_SECONDS) $(JOBS) $$(cat build-fuzz/fuzz/targets.txt)

# Codec throughput, then the same run as multiples of memcpy (the issue's targets).
bench: build
	build/bench/codec_bench --benchmark_min_time=0.2 --benchmark_out=build/codec_bench.json --benchmark_out_format=json
	python3 bench/codec_ratios.py < build/codec_bench.json

# Engine speed on the 0.85B-parameter synthetic Llama shape of issue 3 (written once, 1.7 GB).
synth-085b: build
	@test -f $(SYNTH_085B)/model.safetensors || build/larql synth --out $(SYNTH_085B) --hidden 2048 --layers 16 \
	  --ffn 5632 --heads 32 --kv-heads 8 --vocab 32000 --dtype bf16 --seed 1

bench-engine: synth-085b
	build/bench/engine_bench $(SYNTH_085B) --reps 7 --threads 2

# The same shape as BF16, Q4_K_M, Q5_K_M and Q8_0 GGUF files (written once by larql
# quantize), measured interleaved; ratios against the BF16 file.
bench-gguf: synth-085b
	@test -f $(SYNTH_085B).gguf || build/larql quantize $(SYNTH_085B) $(SYNTH_085B).gguf --type bf16
	@test -f $(SYNTH_085B_Q8).gguf || build/larql quantize $(SYNTH_085B) $(SYNTH_085B_Q8).gguf --type q8_0
	@test -f $(SYNTH_085B_Q4KM).gguf || build/larql quantize $(SYNTH_085B) $(SYNTH_085B_Q4KM).gguf --type q4_k_m
	@test -f $(SYNTH_085B_Q5KM).gguf || build/larql quantize $(SYNTH_085B) $(SYNTH_085B_Q5KM).gguf --type q5_k_m
	build/bench/engine_bench $(SYNTH_085B).gguf $(SYNTH_085B_Q4KM).gguf $(SYNTH_085B_Q5KM).gguf $(SYNTH_085B_Q8).gguf --reps 5 --threads 2

# Mixture of experts at Qwen3-30B-A3B's width (hidden 2048, 32/4 heads of 128, 128 experts
# of 768, top-8, vocabulary 151936 untied) with 12 layers: BF16 written once (~15 GB), then
# Q8_0 and Q4_K_M GGUF files by larql quantize; decode and prefill measured interleaved,
# decode against the bytes a token reads (router + its 8 experts + attention + classifier).
# Then resident memory against the bytes read, with routing that leaves most experts unread.
bench-moe: build
	@test -f $(SYNTH_QWEN3_MOE)/model.safetensors || build/larql synth --family qwen3moe --out $(SYNTH_QWEN3_MOE) --hidden 2048 \
	  --heads 32 --kv-heads 4 --head-dim 128 --ffn 6144 --expert-ffn 768 --experts 128 --experts-used 8 --layers 12 \
	  --vocab 151936 --context 4096 --dtype bf16 --seed 1
	@test -f $(SYNTH_QWEN3_MOE)-q8_0.gguf || build/larql quantize $(SYNTH_QWEN3_MOE) $(SYNTH_QWEN3_MOE)-q8_0.gguf --type q8_0
	@test -f $(SYNTH_QWEN3_MOE)-q4_k_m.gguf || build/larql quantize $(SYNTH_QWEN3_MOE) $(SYNTH_QWEN3_MOE)-q4_k_m.gguf --type q4_k_m
	build/bench/engine_bench $(SYNTH_QWEN3_MOE)-q8_0.gguf $(SYNTH_QWEN3_MOE)-q4_k_m.gguf --reps 3 --threads 2 --prefill-tokens 128
	@# Memory: the same shape with routers that reach 16 of the 128 experts, Q4_K_M; resident
	@# weights after a 32-token decode against the bytes that decode read.
	@test -f $(SYNTH_QWEN3_MOE)-reach16-q4_k_m.gguf || (build/larql synth --family qwen3moe --out $(SYNTH_QWEN3_MOE)-reach16 \
	  --hidden 2048 --heads 32 --kv-heads 4 --head-dim 128 --ffn 6144 --expert-ffn 768 --experts 128 --experts-used 8 \
	  --layers 12 --vocab 151936 --context 4096 --dtype bf16 --seed 1 --reachable-experts 16 && build/larql quantize \
	  $(SYNTH_QWEN3_MOE)-reach16 $(SYNTH_QWEN3_MOE)-reach16-q4_k_m.gguf --type q4_k_m && rm -rf $(SYNTH_QWEN3_MOE)-reach16)
	build/bench/moe_rss_bench $(SYNTH_QWEN3_MOE)-reach16-q4_k_m.gguf

# Remote FFN: per-layer round-trip overhead against raw TCP, then decode local vs two shards.
bench-remote: synth-085b
	build/bench/roundtrip_bench --hidden 4096 --calls 2000 --reps 5 --pin cross
	build/bench/roundtrip_bench --hidden 4096 --calls 2000 --reps 5 --pin same
	python3 bench/remote_decode_bench.py $(SYNTH_085B) --reps 5 --steps 32 --threads 2

# The shapes users will grid: Gemma 3 27B's widths (hidden 5376, FFN 21504, 32 heads of 128,
# 16 KV heads, vocabulary 262144) and Gemma 4 31B's (the same, with heads of 256 on sliding
# layers and 512 with 4 KV heads on full ones), 4 layers each, bf16 (written once, ~6 GB
# each). Decode local versus two shards, per-layer FFN time on a shard, shard RSS per layer.
bench-gemma: build
	@test -f $(SYNTH_G3_27B)/model.safetensors || build/larql synth --family gemma3 --out $(SYNTH_G3_27B) --hidden 5376 \
	  --ffn 21504 --heads 32 --kv-heads 16 --head-dim 128 --layers 4 --vocab 262144 --context 4096 --dtype bf16 --seed 1
	@test -f $(SYNTH_G4_31B)/model.safetensors || build/larql synth --family gemma4 --out $(SYNTH_G4_31B) --hidden 5376 \
	  --ffn 21504 --heads 32 --kv-heads 16 --head-dim 256 --global-head-dim 512 --global-kv-heads 4 --layers 4 \
	  --vocab 262144 --context 4096 --dtype bf16 --seed 1
	python3 bench/remote_decode_bench.py $(SYNTH_G3_27B) --reps 3 --steps 16 --threads 2
	python3 bench/remote_decode_bench.py $(SYNTH_G4_31B) --reps 3 --steps 16 --threads 2

# Accuracy of f16, q8 and i8 against f32, teacher-forced (10 prompts × 100 steps per model).
bench-wire: build
	python3 bench/wire_accuracy.py --larql build/larql --steps 100

# The whole grid on this machine, on the committed demo model (models/demo).
demo: build
	build/larql demo

# Re-makes models/demo (about 40 minutes on 2 cores; not part of build or CI). Installs
# Debian's PyTorch, OpenBLAS and the King James Bible first.
train-demo-model:
	@bash scripts/install-train-deps.sh
	/usr/bin/python3 tools/train_demo_model.py --out models/demo

# The mixture-of-experts demo: Mixtral's shape, 4 layers of 8 experts (top-2), the demo's tokenizer.
train-demo-moe-model:
	@bash scripts/install-train-deps.sh
	/usr/bin/python3 tools/train_demo_model.py --out models/demo-moe --layers 4 --ffn 512 --experts 8 \
	  --experts-per-token 2 --tokenizer models/demo/tokenizer.json --steps 600

# The draft for speculative decoding with the demo model: its shape cut to 2 layers, its tokenizer.
train-demo-draft-model:
	@bash scripts/install-train-deps.sh
	/usr/bin/python3 tools/train_demo_model.py --out models/demo-draft --layers 2 --ffn 512 \
	  --tokenizer models/demo/tokenizer.json --steps 1500

clean:
	rm -rf build build-asan build-fuzz
