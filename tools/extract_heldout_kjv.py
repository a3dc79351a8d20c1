#!/usr/bin/env python3
"""Writes the King James Bible chapters the demo model's training held out (every 20th,
tools/demo_model/corpus.py), as the training script joined its text: one verse per line.
The result is committed as tests/data/kjv-heldout.txt (public domain), the text
`larql perplexity` is tested and benchmarked on. Needs Debian's bible-kjv."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
from demo_model import corpus  # noqa: E402

_, held_out = corpus.split_chapters(corpus.read_chapters())
sys.stdout.write("\n".join(v for _, vs in held_out for v in vs) + "\n")
