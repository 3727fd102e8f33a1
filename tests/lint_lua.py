#!/usr/bin/env python3
"""Lints the Lua scripts as Redis receives them (BUILD/lua/*.lua, put together by
cmake/embed_lua.cmake) with Lua 5.1's compiler, the Lua of Redis:

- each compiles (luac5.1 -p);
- none assigns a global: Redis refuses that at run time ("Script attempted to create global");
- none reads a global outside what Redis gives scripts: a misspelt local function or variable
  is a global read that would fail only when that line runs;
- every script in src/lock/lua is embedded, or used by one that is;
- every command a script calls is one that rlock doctor tries (doctor_probe.lua), so that
  doctor names each command an ACL denies.

    tests/lint_lua.py SOURCE_DIR BUILD_DIR [LUAC]
"""
import os
import re
import shutil
import subprocess
import sys

# What Redis's Lua offers a script (scripting.c, the libraries it opens).
KNOWN_GLOBALS = {"redis", "KEYS", "ARGV", "unpack", "tonumber", "tostring", "type", "math",
                 "string", "table", "pairs", "ipairs", "select", "error", "pcall", "next",
                 "assert", "cjson", "cmsgpack", "bit", "struct"}


def main():
    source, build = sys.argv[1], sys.argv[2]
    luac = sys.argv[3] if len(sys.argv) > 3 else shutil.which("luac5.1")
    if not luac:
        sys.exit("luac5.1 not found: install lua5.1 (packaging/setup-debian.sh does)")
    problems = []
    embedded = sorted(f for f in os.listdir(os.path.join(build, "lua")) if f.endswith(".lua"))
    used = set()
    for name in embedded:
        path = os.path.join(build, "lua", name)
        with open(path) as f:
            text = f.read()
        for m in re.finditer(r"^-- uses: (.*)$", text, re.M):
            used.update(u.strip() for u in m.group(1).split(","))
        r = subprocess.run([luac, "-p", "-l", "-l", path], capture_output=True, text=True)
        if r.returncode != 0:
            problems.append(r.stderr.strip())
            continue
        for m in re.finditer(r"\[(\d+)\]\s+(SETGLOBAL|GETGLOBAL)\s.*; (\S+)", r.stdout):
            line, op, global_name = m.groups()
            if op == "SETGLOBAL":
                problems.append(f"{path}:{line}: assigns the global '{global_name}' "
                                "(Redis refuses that; make it local)")
            elif global_name not in KNOWN_GLOBALS:
                problems.append(f"{path}:{line}: reads '{global_name}', neither a local nor "
                                "anything Redis gives scripts (a typo?)")
    for f in sorted(os.listdir(os.path.join(source, "src", "lock", "lua"))):
        if f.endswith(".lua") and f not in embedded and f not in used:
            problems.append(f"src/lock/lua/{f} is neither embedded (RLOCK_LUA_SCRIPTS in "
                            "CMakeLists.txt) nor used by a script that is")
    lua_dir = os.path.join(source, "src", "lock", "lua")
    with open(os.path.join(lua_dir, "doctor_probe.lua")) as f:
        probed = set(re.findall(r"\{'([A-Z]+)'", f.read())) | {"TIME"}
    for f in sorted(os.listdir(lua_dir)):
        if not f.endswith(".lua") or f == "doctor_probe.lua":
            continue
        with open(os.path.join(lua_dir, f)) as script:
            for n, line in enumerate(script, 1):
                for command in re.findall(r"redis\.p?call\('([A-Za-z]+)'", line):
                    if command.upper() not in probed:
                        problems.append(f"src/lock/lua/{f}:{n}: calls {command}, which "
                                        "doctor_probe.lua does not try")
    for p in problems:
        print(p)
    print(f"{len(embedded)} scripts linted, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
