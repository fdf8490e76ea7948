#!/usr/bin/env python3
"""Checks the shape of src/: includes run down the floors (and down core's rooms), no source file is
longer than MAX_FILE_LINES, no function longer than MAX_FUNCTION_LINES.

Floors, top to bottom (a file may include its own floor and those below it):
    cli, inject, preload > cupti > cuda > kernels > cuda_error > core
core's rooms, top to bottom: report > analysis > records > model > numerics > base.

Files and functions that were over the limits when the check was introduced are listed in
OVERSIZE with the size they had: they may shrink (the check says when one can leave the list) but
not grow, and nothing new may join them. Exit 0 when the tree holds to all of it, 1 otherwise.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100

FLOORS = {"cli": 6, "inject": 6, "preload": 6, "cupti": 5, "cuda": 4, "kernels": 3, "cuda_error": 2, "core": 1}
ROOMS = {"report": 6, "analysis": 5, "records": 4, "model": 3, "numerics": 2, "base": 1}

# path or path:function -> lines it had; may shrink, never grow. Empty it as the code is split.
OVERSIZE = {}

SOURCE_SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh", ".h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def level(rel: pathlib.PurePosixPath):
    """(floor, room) of a path under src/; room 0 outside core."""
    parts = rel.parts
    floor = FLOORS.get(parts[0])
    if floor is None:
        return None
    room = ROOMS.get(parts[1], 0) if parts[0] == "core" and len(parts) > 2 else 0
    return floor, room


def include_errors(path: pathlib.Path, rel: pathlib.PurePosixPath):
    here = level(rel)
    if here is None:
        return []
    errors = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        target = pathlib.PurePosixPath(m.group(1))
        there = level(target)
        if there is None or not (SRC / target).exists():
            continue  # generated headers (tpgraph/version.hpp), includes relative to the file
        if there[0] > here[0] or (there[0] == here[0] == FLOORS["core"] and there[1] > here[1]):
            errors.append(f"{rel}:{number}: includes {target}, which is above it")
    return errors


def strip_code(text: str) -> str:
    """Comments, string and character literals blanked (newlines kept), so braces can be counted."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "R" and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


SIGNATURE_END = re.compile(r"(\)|\bconst|\bnoexcept|\boverride|\bfinal|->\s*[\w:<>,\s*&]+|\bmutable)\s*$")
SCOPE_OPENERS = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;{}()]*$")


def functions(text: str):
    """(name, first line, line count) of each function body at namespace or class scope."""
    code = strip_code(text)
    found = []
    stack = []  # per open brace: True when it is a scope (namespace/class/...), else False
    i = 0
    while i < len(code):
        c = code[i]
        if c == "{":
            head = code[max(0, code.rfind(";", 0, i), code.rfind("}", 0, i), code.rfind("{", 0, i)) + 1 : i]
            in_body = any(not s for s in stack)
            if not in_body and SCOPE_OPENERS.search(head.replace("\n", " ")) and "(" not in head:
                stack.append(True)
            elif not in_body and SIGNATURE_END.search(head.strip()) and "(" in head:
                depth, j = 1, i + 1
                while j < len(code) and depth:
                    depth += {"{": 1, "}": -1}.get(code[j], 0)
                    j += 1
                start = code.count("\n", 0, i) + 1
                end = code.count("\n", 0, j - 1) + 1
                name = re.findall(r"([~\w:]+)\s*\(", head)
                found.append((name[0] if name else "?", start, end - start + 1))
                i = j
                continue
            else:
                stack.append(False)
        elif c == "}" and stack:
            stack.pop()
        i += 1
    return found


def main() -> int:
    errors, shrunk = [], []
    seen_oversize = set()
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        rel = pathlib.PurePosixPath(path.relative_to(SRC).as_posix())
        errors += include_errors(path, rel)
        text = path.read_text(errors="replace")
        lines = text.count("\n")
        key = f"src/{rel}"
        limit = OVERSIZE.get(key)
        if limit is not None:
            seen_oversize.add(key)
        if lines > MAX_FILE_LINES:
            if limit is None:
                errors.append(f"{key}: {lines} lines (at most {MAX_FILE_LINES})")
            elif lines > limit:
                errors.append(f"{key}: {lines} lines, more than the {limit} it was allowed while it is split")
        elif limit is not None:
            shrunk.append(key)
        for name, start, count in functions(text):
            fkey = f"{key}:{name}"
            flimit = OVERSIZE.get(fkey)
            if flimit is not None:
                seen_oversize.add(fkey)
            if count > MAX_FUNCTION_LINES:
                if flimit is None:
                    errors.append(f"{key}:{start}: {name} is {count} lines (at most {MAX_FUNCTION_LINES})")
                elif count > flimit:
                    errors.append(f"{key}:{start}: {name} is {count} lines, more than the {flimit} it was allowed")
            elif flimit is not None:
                shrunk.append(fkey)
    for key in sorted(set(OVERSIZE) - seen_oversize):
        shrunk.append(key)
    for e in errors:
        print(e)
    for key in shrunk:
        print(f"{key} is within the limits now: remove it from OVERSIZE in scripts/check_structure.py")
    if OVERSIZE:
        print(f"{len(OVERSIZE)} files and functions are still over the limits (OVERSIZE)")
    return 1 if errors or shrunk else 0


if __name__ == "__main__":
    sys.exit(main())
