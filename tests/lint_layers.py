#!/usr/bin/env python3
"""The layers of src/ (docs/ARCHITECTURE.md "Layers"): each folder includes only the folders
its README.md names on its "May include:" line, and every include names its folder. Prints
every include that crosses a layer; exit 1 if any.

    tests/lint_layers.py SOURCE_DIR
"""
import os
import re
import sys

def may_include(src, folder):
    """The folders FOLDER may include besides itself: its README's "May include:" line."""
    with open(os.path.join(src, folder, "README.md")) as f:
        for line in f:
            if line.startswith("May include:"):
                return set(re.findall(r"(\w+)/", line))
    return None


def main():
    src = os.path.join(sys.argv[1], "src")
    problems = []
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            problems.append(f"src/{folder}: a file outside the folders")
            continue
        allowed = may_include(src, folder) if os.path.exists(os.path.join(path, "README.md")) else None
        if allowed is None:
            problems.append(f"src/{folder}: no README.md with a \"May include:\" line")
            continue
        allowed |= {folder}
        for name in sorted(os.listdir(path)):
            if not name.endswith((".cpp", ".h")):
                continue
            with open(os.path.join(path, name)) as f:
                for n, line in enumerate(f, 1):
                    m = re.match(r'\s*#include "([^"/]+)/', line)
                    if m and m.group(1) not in allowed:
                        problems.append(f"src/{folder}/{name}:{n}: includes {m.group(1)}/, "
                                        f"above {folder}/")
                    elif re.match(r'\s*#include "[^"/]+"', line):
                        problems.append(f"src/{folder}/{name}:{n}: an include without its folder")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
