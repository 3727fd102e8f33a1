"""bench/results.md is written by several benchmarks: each owns one section between markers
(<!-- NAME --> ... <!-- /NAME -->), replaced when it runs again, added at the end at first."""
import os
import re


def write_section(path, name, text):
    begin, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    old = open(path).read() if os.path.exists(path) else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(old):
        new = pattern.sub(lambda _: block, old, count=1)
    else:
        new = old + ("\n" if old and not old.endswith("\n\n") else "") + block
    with open(path, "w") as f:
        f.write(new)
