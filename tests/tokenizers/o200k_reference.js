// GPT-OSS's tokenizer (o200k_harmony) from js-tiktoken's o200k_base ranks, the second
// implementation it is checked against:
//   node o200k_reference.js OUT_DIR CORPUS.json
// writes OUT_DIR/tokenizer.json as Hugging Face lays such a tokenizer out (byte-level BPE,
// merges from the ranks as transformers converts tiktoken files: every split of a token into
// two tokens, ordered by the token's rank, whole pieces in the vocabulary taken as they are,
// o200k's pre-tokenizer pattern, the harmony special tokens), then encodes the corpus with
// js-tiktoken itself. Prints {"tokenizer_json": path, "results": [{"ids": [...]}, ...]}.
const fs = require("fs");
const path = require("path");
const { Tiktoken } = require("js-tiktoken/lite");
const o200k = require("js-tiktoken/ranks/o200k_base");

const [outDir, corpusPath] = process.argv.slice(2);
const corpus = require(path.resolve(corpusPath));
const ranks = o200k.default || o200k;

// GPT-2's printable stand-ins for the 256 bytes.
const byteChar = [];
for (let b = 0, n = 0; b < 256; ++b) {
  const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  byteChar.push(String.fromCodePoint(printable ? b : 256 + n++));
}
const toVocab = (bytes) => Array.from(bytes, (b) => byteChar[b]).join("");

const tokens = [];  // [bytes, rank]
for (const line of ranks.bpe_ranks.split("\n")) {
  if (!line) continue;
  const [, offset, ...encoded] = line.split(" ");
  encoded.forEach((t, i) => tokens.push([Buffer.from(t, "base64"), Number(offset) + i]));
}
const vocab = {};
const rankOf = new Map();
for (const [bytes, rank] of tokens) {
  vocab[toVocab(bytes)] = rank;
  rankOf.set(bytes.toString("latin1"), rank);
}
const merges = [];
tokens.sort((a, b) => a[1] - b[1]);
for (const [bytes, rank] of tokens) {
  const key = bytes.toString("latin1");
  const local = [];
  for (let i = 1; i < key.length; ++i) {
    const left = key.slice(0, i), right = key.slice(i);
    if (rankOf.has(left) && rankOf.has(right)) local.push([left, right]);
  }
  local.sort((a, b) => rankOf.get(a[0]) - rankOf.get(b[0]) || rankOf.get(a[1]) - rankOf.get(b[1]));
  for (const [l, r] of local) merges.push(toVocab(Buffer.from(l, "latin1")) + " " + toVocab(Buffer.from(r, "latin1")));
}
// The pattern as tiktoken's o200k (and GPT-OSS's tokenizer.json) writes it; js-tiktoken
// spells its case-insensitive contractions out, to the same effect.
const kPattern = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
  "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// o200k_harmony's special tokens; the rest of 199998..201087 reserved.
const named = { 199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
                200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>",
                200018: "<|endofprompt|>" };
const added = [];
for (let id = 199998; id < 201088; ++id)
  added.push({ id, content: named[id] || `<|reserved_${id}|>`, single_word: false, lstrip: false, rstrip: false,
               normalized: false, special: true });
const doc = {
  version: "1.0",
  added_tokens: added,
  normalizer: null,
  pre_tokenizer: { type: "Sequence", pretokenizers: [
    { type: "Split", pattern: { Regex: kPattern }, behavior: "Isolated", invert: false },
    { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false } ] },
  post_processor: null,
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
           fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
};
fs.mkdirSync(outDir, { recursive: true });
const tokenizerJson = path.join(path.resolve(outDir), "tokenizer.json");
fs.writeFileSync(tokenizerJson, JSON.stringify(doc));
const enc = new Tiktoken(ranks);
const results = corpus.map((text) => ({ ids: Array.from(enc.encode(text, "all")) }));
process.stdout.write(JSON.stringify({ tokenizer_json: tokenizerJson, results }));
