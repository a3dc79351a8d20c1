#!/usr/bin/env python3
"""Makes the llama2.c parity oracle of tests/infer/reference_parity_test.cc.

The demo model (models/demo) is exported to run.c's format by `larql export-llama2c`, and
the reference C implementation (llama2.c's run.c, built by whoever runs this; it is not part
of this repository) generates from it greedily. run.c can only print text through a
tokenizer.bin, and the demo's byte-level BPE cannot be one, so this script writes a
tokenizer.bin whose pieces name ids: id i is the one character U+4E00+i, except the demo's
space token, which is " " (run.c feeds the id of " " before any non-empty prompt). A prompt
is then the characters of its ids, no two pieces merge, and run.c's printed text reads back
as ids one character each.

Usage (once; the outputs are committed):
  gcc -O2 -o run run.c -lm        # run.c from llama2.c
  tools/make_llama2c_oracle.py --run-c ./run --larql build/larql
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile

BASE = 0x4E00  # CJK Unified Ideographs: 20992 one-character pieces, all printable


def piece(i, space_id):
    return " " if i == space_id else chr(BASE + i)


def write_tokenizer(path, vocab, space_id):
    pieces = [piece(i, space_id).encode() for i in range(vocab)]
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for p in pieces:
            f.write(struct.pack("<fi", 0.0, len(p)) + p)


def ids_of_text(text, space_id):
    return [space_id if ch == " " else ord(ch) - BASE for ch in text]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-c", required=True, help="run.c built as an executable")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--model", default="models/demo")
    ap.add_argument("--out", default="tests/data/llama2c")
    ap.add_argument("--positions", type=int, default=96, help="run.c -n: positions in total, prompt included")
    args = ap.parse_args()

    tokenizer_json = json.load(open(os.path.join(args.model, "tokenizer.json")))
    vocab = len(tokenizer_json["model"]["vocab"]) + sum(
        1 for t in tokenizer_json.get("added_tokens", []) if t["content"] not in tokenizer_json["model"]["vocab"])
    space_id = tokenizer_json["model"]["vocab"]["Ġ"]  # byte-level BPE's space
    os.makedirs(args.out, exist_ok=True)
    tokenizer_path = os.path.join(args.out, "demo-ids.tokenizer.bin")
    write_tokenizer(tokenizer_path, vocab, space_id)

    def demo_ids(text):
        out = subprocess.run([args.larql, "tokenize", args.model, "--text", text, "--json"], check=True,
                             capture_output=True, text=True).stdout
        ids = json.loads(out)["ids"]
        return ids[1:] if ids and ids[0] == 0 else ids  # the demo tokenizer's own <s>; run.c feeds BOS = 1

    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "demo.bin")
        subprocess.run([args.larql, "export-llama2c", args.model, model_path], check=True)
        sequences = []
        for text in ["", "And the LORD said unto Moses,", "In the beginning"]:
            body = demo_ids(text) if text else []
            prompt = "".join(piece(i, space_id) for i in body)
            printed = subprocess.run([args.run_c, model_path, "-z", tokenizer_path, "-t", "0", "-n",
                                      str(args.positions), "-i", prompt], check=True, capture_output=True,
                                     text=True).stdout
            assert printed.endswith("\n"), printed
            # run.c prints every position's next token after the first; after BOS the dummy " "
            # prints as nothing (its leading space is stripped), so it is put back here.
            prompt_ids = [1] + ([space_id] if prompt else []) + body
            fed_after_bos = ([space_id] if prompt else []) + ids_of_text(printed[:-1], space_id)
            assert fed_after_bos[:len(prompt_ids) - 1] == prompt_ids[1:], (fed_after_bos, prompt_ids)
            sequences.append({"demo_text": text, "prompt": prompt, "prompt_ids": prompt_ids,
                              "continuation_ids": fed_after_bos[len(prompt_ids) - 1:], "printed": printed})

    expected = {
        "model": "models/demo exported by `larql export-llama2c` (f32)",
        "tokenizer": "demo-ids.tokenizer.bin (this script: id i is the character U+4E00+i, the demo's space token is ' ')",
        "how": ("llama2.c run.c, greedy (-t 0), %d positions in total including the prompt; BOS = 1 is fed first; "
                "prompt_ids include it and, for a non-empty prompt, run.c's dummy ' ' (id %d); continuation_ids "
                "are the greedy ids that follow; run.c stops early if it samples 1; printed is run.c's stdout"
                % (args.positions, space_id)),
        "sequences": sequences,
    }
    with open(os.path.join(args.out, "demo.run_c.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
