"""Byte-level BPE (the GPT-2 scheme) trained from scratch and saved as a
Hugging Face tokenizer.json: ByteLevel pre-tokenizer and decoder, a
"<s> $A" template so encoders add the BOS token, "</s>" as end of text."""
import collections
import json
import re

BOS, EOS = "<s>", "</s>"

# The ByteLevel pre-tokenizer's pattern with \p{L} / \p{N} spelt for ASCII;
# train_demo_model.py checks that the corpus is ASCII.
_PRETOKEN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, map(chr, chars)))


class ByteLevelBPE:
    def __init__(self, vocab, merges):
        self.vocab = vocab          # token string -> id
        self.merges = merges        # [(left, right), ...] in rank order
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.byte_map = bytes_to_unicode()
        self.cache = {}

    @classmethod
    def train(cls, texts, vocab_size):
        byte_map = bytes_to_unicode()
        words = collections.Counter()
        for text in texts:
            for piece in _PRETOKEN.findall(text):
                words["".join(byte_map[b] for b in piece.encode())] += 1
        specials = [BOS, EOS]
        alphabet = sorted(set(byte_map.values()))
        n_merges = vocab_size - len(specials) - len(alphabet)
        merges = _learn_merges(words, n_merges)
        vocab = {s: i for i, s in enumerate(specials)}
        for token in alphabet + [a + b for a, b in merges]:
            vocab.setdefault(token, len(vocab))
        return cls(vocab, merges)

    def encode_piece(self, piece):
        if piece in self.cache:
            return self.cache[piece]
        symbols = list(piece)
        while len(symbols) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        ids = [self.vocab[s] for s in symbols]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        """Token ids of `text` without the BOS the template adds."""
        ids = []
        for piece in _PRETOKEN.findall(text):
            ids += self.encode_piece("".join(self.byte_map[b] for b in piece.encode()))
        return ids

    def decode(self, ids):
        inverse = {v: k for k, v in self.vocab.items()}
        unbyte = {c: b for b, c in self.byte_map.items()}
        text = "".join(inverse[i] for i in ids if inverse[i] not in (BOS, EOS))
        return bytes(unbyte[c] for c in text).decode("utf-8", errors="replace")

    def to_json(self):
        specials = [{"id": self.vocab[s], "content": s, "single_word": False, "lstrip": False,
                     "rstrip": False, "normalized": False, "special": True} for s in (BOS, EOS)]
        bos = {"id": BOS, "ids": [self.vocab[BOS]], "tokens": [BOS]}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": specials,
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": BOS, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {BOS: bos},
            },
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": self.vocab,
                      "merges": [f"{a} {b}" for a, b in self.merges]},
        }


def _learn_merges(words, n_merges):
    """Classic BPE: repeatedly merge the most frequent adjacent pair, keeping
    pair counts and the words each pair occurs in up to date incrementally."""
    entries = [[list(w), n] for w, n in words.items()]
    pair_count = collections.Counter()
    pair_words = collections.defaultdict(set)
    for wi, (symbols, n) in enumerate(entries):
        for pair in zip(symbols, symbols[1:]):
            pair_count[pair] += n
            pair_words[pair].add(wi)
    merges = []
    while len(merges) < n_merges and pair_count:
        # Highest count; ties broken by the pair itself so training is deterministic.
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pair_count[best] < 2:
            break
        merges.append(best)
        merged = best[0] + best[1]
        for wi in list(pair_words[best]):
            symbols, n = entries[wi]
            for pair in zip(symbols, symbols[1:]):
                pair_count[pair] -= n
                if pair_count[pair] <= 0:
                    del pair_count[pair]
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            entries[wi][0] = out
            for pair in zip(out, out[1:]):
                pair_count[pair] += n
                pair_words[pair].add(wi)
        del pair_words[best]
    return merges


def load(path):
    with open(path) as f:
        model = json.load(f)["model"]
    return ByteLevelBPE(model["vocab"], [tuple(m.split(" ")) for m in model["merges"]])


def save(tokenizer, path):
    with open(path, "w") as f:
        json.dump(tokenizer.to_json(), f, ensure_ascii=False, indent=1)
