"""benchmarks/RESULTS.md is written by several harnesses; each owns one
section, kept between `<!-- results: NAME -->` and `<!-- /results: NAME -->`
lines, and rewrites only that section, so that running one harness again
replaces its own figures and keeps everyone else's.

    with resultsfile.section("benchmarks/RESULTS.md", "b2nd") as f:
        f.write(text)

A section not yet in the file is appended, or put first with first=True
(the main table of `make bench`).
"""

import contextlib
import io
import os
import re


def _markers(name):
    return f"<!-- results: {name} -->", f"<!-- /results: {name} -->"


def write_section(path, name, text, first=False):
    begin, end = _markers(name)
    block = f"{begin}\n{text.strip()}\n{end}\n"
    old = open(path).read() if os.path.exists(path) else ""
    m = re.search(re.escape(begin) + r"\n.*?" + re.escape(end) + r"\n?", old, re.S)
    if m:
        new = old[:m.start()] + block + old[m.end():]
    elif first:
        new = block + ("\n" + old if old else "")
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + block
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)


@contextlib.contextmanager
def section(path, name, first=False):
    buf = io.StringIO()
    yield buf
    write_section(path, name, buf.getvalue(), first=first)
