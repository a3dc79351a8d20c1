"""The King James Bible from Debian's bible-kjv-text, as plain verses.

The package stores the text compressed; its `bible` program (package
bible-kjv) prints it with one "Book<chapter>:<verse> text" line per verse.
"""
import re
import subprocess

_VERSE = re.compile(r"^(.*?)(\d+):(\d+) (.*)$")


def read_chapters():
    """Returns [(chapter_name, [verse, ...]), ...] in canonical order."""
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True,
                         capture_output=True, text=True).stdout
    chapters = []
    for line in out.splitlines():
        m = _VERSE.match(line.strip())
        if not m:
            raise ValueError(f"unexpected line from `bible`: {line!r}")
        name = f"{m.group(1)}{m.group(2)}"
        if not chapters or chapters[-1][0] != name:
            chapters.append((name, []))
        chapters[-1][1].append(m.group(4))
    if len(chapters) != 1189:
        raise ValueError(f"expected the 1189 chapters of the KJV, got {len(chapters)}")
    return chapters


def split_chapters(chapters, every=20):
    """Every `every`-th chapter is held out for validation (whole chapters, so
    no verse of the validation text has a neighbour in the training text)."""
    train = [c for i, c in enumerate(chapters) if i % every != every - 1]
    val = [c for i, c in enumerate(chapters) if i % every == every - 1]
    return train, val
