#!/usr/bin/env python3
"""Warp-stall summary of Nsight Compute's source page, per kernel.

Input: the CSV of `ncu -i REPORT --page source --csv --print-source sass` (tens of MB for a grouped
GEMM); output: a few lines per profiled kernel that fit in a log: the stall reasons over all
samples, executed instructions by opcode, the opcodes the samples sit on and the hottest SASS
lines with their main stall reason. Used by scripts/gpu-kernels.sh (step ncu).
"""
import collections
import csv
import sys


def kernels_of(path):
    kernels, current = [], None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                current = {"name": row[1], "header": None, "rows": []}
                kernels.append(current)
            elif current is not None and row and row[0] == "Address":
                current["header"] = row
            elif current is not None and current["header"] and len(row) == len(current["header"]):
                current["rows"].append(row)
    # ncu repeats a kernel's table when it lists several views of it: keep the first of each name.
    seen, unique = set(), []
    for k in kernels:
        key = (k["name"], len(k["rows"]))
        if key not in seen and k["rows"]:
            seen.add(key)
            unique.append(k)
    return unique


def opcode(sass):
    words = sass.strip().split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summarize(kernel, top):
    header = kernel["header"]
    col = {name: i for i, name in enumerate(header)}
    samples_col = col["Warp Stall Sampling (All Samples)"]
    stall_cols = [n for n in header if n.startswith("stall_") and "Not Issued" not in n]
    number = lambda row, name: int(row[col[name]] or 0)
    reasons, ops, op_samples = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0
    for row in kernel["rows"]:
        samples = int(row[samples_col] or 0)
        total += samples
        op = opcode(row[1])
        ops[op] += number(row, "Instructions Executed")
        op_samples[op] += samples
        for name in stall_cols:
            reasons[name[6:]] += number(row, name)
    total = max(total, 1)
    print(f"{kernel['name'][:110]}")
    print(f"  samples {total}, warp instructions executed {sum(ops.values()) / 1e6:.2f} M")
    print("  stalls: " + ", ".join(f"{n} {100 * v / total:.1f}%" for n, v in reasons.most_common(10)))
    print("  executed: " + ", ".join(f"{o} {v / 1e6:.2f}M" for o, v in ops.most_common(14)))
    print("  samples on: " + ", ".join(f"{o} {100 * v / total:.1f}%" for o, v in op_samples.most_common(10)))
    hottest = sorted(kernel["rows"], key=lambda r: -int(r[samples_col] or 0))[:top]
    for row in hottest:
        main = max(stall_cols, key=lambda n: number(row, n))
        print(f"   {100 * int(row[samples_col] or 0) / total:5.1f}%  {row[1].strip()[:64]:64s} {main[6:]}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ncu_stalls.py SOURCE_PAGE.csv")
    for kernel in kernels_of(sys.argv[1]):
        summarize(kernel, top=14)


if __name__ == "__main__":
    main()
