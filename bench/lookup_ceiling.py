#!/usr/bin/env python3
"""How many tokens a pass of greedy speculative decoding can give with prompt-lookup drafts
on given prompts, and how many no lookup draft can beat (issue 50).

  bench/lookup_ceiling.py [MODEL] [--larql build/larql] [--prompts 5] [--steps 128]

Greedy verification keeps a draft's tokens while they equal plain greedy decoding's, so the
tokens per pass of any drafting rule follow from plain greedy's ids alone, without a
network. Over a slow link a pass costs one round trip per layer (a few more rows add only
their bytes), so the speed-up over plain decoding is at most the tokens per pass. For the
held-out prompts of bench/speculative_link.py this prints, per rule, the tokens per pass
and the rows a pass verifies (its tokens and drafts; a tree's distinct prefixes):

  - `larql run --draft lookup`, as a chain (8 drafts) and as trees of 4 continuations
    (16 drafts, at most 17 rows), measured (their passes) and simulated here
    (lookup_draft.cc, draft_tree.cc and DraftLength in generate.h), which must agree;
  - trees of the B most recent distinct continuations of the context's tail, rows not
    capped (what a pass over several drafts sharing their prefixes keeps);
  - the ceiling: every earlier continuation of the context's last token, the one that
    matches longest chosen by an oracle, up to 64 drafts a pass."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import heldout_prompts  # noqa: E402


class FixedLength:
    """Always max_draft: the ceiling is not limited by a rule for the length."""

    def __init__(self, max_draft):
        self.max_draft = max_draft

    def wanted(self):
        return self.max_draft

    def after(self, drafted, kept):
        pass


class DraftLength:
    """generate.h's adaptive draft length, step for step."""

    def __init__(self, max_draft, probe_every=16):
        self.max_draft, self.probe_every = max_draft, probe_every
        self.k, self.wait, self.since, self.kept_any = (max_draft + 1) // 2, probe_every, 0, False

    def wanted(self):
        if self.k == 0:
            self.since += 1
            if self.since >= self.wait:
                self.since = 0
                return 1
        return self.k

    def after(self, drafted, kept):
        if drafted == 0:
            return
        if kept > 0:
            self.k, self.wait, self.kept_any = self.max_draft, self.probe_every, True
        elif self.k > 0:
            self.k = self.k - 1 if self.kept_any else self.k // 2
        else:
            self.wait = min(2 * self.wait, 16 * self.probe_every)


def continuations(context, k, max_ngram, limit):
    """Up to `limit` distinct continuations (k tokens at most) of earlier occurrences of the
    context's tail: longest tail first, most recent occurrence first. limit 1 is
    lookup_draft.cc's draft."""
    n, found = len(context), []
    for length in range(min(max_ngram, n - 1), 0, -1):
        tail = context[n - length:]
        for start in range(n - length - 1, -1, -1):
            if context[start:start + length] != tail:
                continue
            draft = context[start + length:start + length + k]
            if draft and not any(d[:len(draft)] == draft for d in found):
                found.append(draft)
                if len(found) == limit:
                    return found
    return found


def tree_of(drafts, max_rows):
    """draft_tree.cc's DraftTree::build: (tokens, parents) of the drafts as paths under row 0
    (the token already chosen, here None), shared prefixes once, at most max_rows rows."""
    tokens, parents = [None], [-1]
    for draft in drafts:
        row = 0
        for token in draft:
            child = next((r for r in range(row + 1, len(tokens)) if parents[r] == row and tokens[r] == token), None)
            if child is None:
                if len(tokens) == max_rows:
                    break
                child = len(tokens)
                tokens.append(token)
                parents.append(row)
            row = child
    return tokens, parents


def passes_over(prompt, greedy, drafts_for, length, max_rows=None):
    """(passes, rows) of greedy speculative decoding that emits `greedy` (the first id from
    the prefill) with drafts_for(context, k) proposing a pass's drafts, verified as one tree
    of at most max_rows rows (default: every draft whole), and `length` (a DraftLength)
    choosing k."""
    context, emitted = list(prompt) + [greedy[0]], 1
    passes = rows = 0
    while emitted < len(greedy):
        drafts = drafts_for(context, min(length.wanted(), len(greedy) - emitted))
        tokens, parents = tree_of(drafts, max_rows or 1 + sum(len(d) for d in drafts))
        row = kept = 0  # down the tree while a child is greedy's next id
        while emitted + kept < len(greedy):
            want = greedy[emitted + kept]
            child = next((r for r in range(row + 1, len(tokens)) if parents[r] == row and tokens[r] == want), None)
            if child is None:
                break
            row, kept = child, kept + 1
        rows += len(tokens)
        length.after(len(tokens) - 1, kept)
        context += greedy[emitted:emitted + kept + 1]
        emitted += kept + 1
        passes += 1
    return passes, rows


def run(larql, model, prompt, steps, extra):
    out = subprocess.run([larql, "run", model, "--prompt", prompt, "--steps", str(steps), "--ignore-eos", "--json",
                          "--threads", "2"] + extra, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="models/demo")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--steps", type=int, default=128)
    a = ap.parse_args()
    # larql's own runs: (--draft-max, --draft-branches) -> passes over every prompt.
    shapes = [(8, 1), (16, 4)]
    plain, measured = [], {shape: 0 for shape in shapes}
    for prompt in heldout_prompts(a.prompts):
        base = run(a.larql, a.model, prompt, a.steps, [])
        plain.append((base["prompt_ids"], base["generated_ids"]))
        for max_draft, branches in shapes:
            fast = run(a.larql, a.model, prompt, a.steps,
                       ["--draft", "lookup", "--draft-max", str(max_draft), "--draft-branches", str(branches)])
            if fast["generated_ids"] != base["generated_ids"]:
                sys.exit(f"--draft lookup gave other ids than plain greedy for {prompt!r}")
            measured[(max_draft, branches)] += fast["passes"]
    tokens = sum(len(g) - 1 for _, g in plain)

    def report(name, drafts_for, max_draft, length_rule=DraftLength, max_rows=None):
        passes = rows = 0
        for prompt, greedy in plain:
            p, r = passes_over(prompt, greedy, drafts_for, length_rule(max_draft), max_rows)
            passes, rows = passes + p, rows + r
        print(f"{name:70s} {tokens / passes:11.2f} {rows / passes:9.2f}", flush=True)

    print(f"model {a.model}: {len(plain)} held-out prompts x {a.steps} greedy tokens, {tokens} after the prefill's")
    print(f"{'rule':70s} {'tokens/pass':>11s} {'rows/pass':>9s}")
    for max_draft, branches in shapes:
        name = f"--draft lookup --draft-max {max_draft} --draft-branches {branches}, measured"
        print(f"{name:70s} {tokens / measured[(max_draft, branches)]:11.2f} {'':>9s}")
        report("  the same, simulated", lambda c, k, b=branches: continuations(c, k, 3, b), max_draft,
               max_rows=max_draft + 1)
    for max_draft in (8, 16):
        for branches in (2, 4, 8):
            report(f"tree of {branches} continuations, {max_draft} drafts deep, rows not capped",
                   lambda c, k, b=branches: continuations(c, k, 3, b), max_draft)
    report("ceiling: the best of every continuation, 64 drafts deep",
           lambda c, k: [c[s:s + k] for s in range(1, len(c)) if c[s - 1] == c[-1]], 64, FixedLength)


if __name__ == "__main__":
    main()
