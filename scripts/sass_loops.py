#!/usr/bin/env python3
"""The MMA loops of the grouped GEMM kernels in the SASS of one or more builds.

    scripts/sass_loops.py FILE [FILE ...]             one row per kernel and file
    scripts/sass_loops.py --loops FILE [FILE ...]     one row per loop and file
    scripts/sass_loops.py --path KERNEL N FILE [...]  the instructions counted for loop N

FILE is anything cuobjdump reads (a binary such as build-ci/tpgraph, stripped or not, an object
or a cubin); NAME=FILE labels a column (kernel-variants.sh passes its variant names). A loop is
a backward branch; an MMA loop is one that holds HMMA or HGMMA instructions and no other MMA
loop. What is counted is the shortest way through one iteration that passes every MMA in it:
every forward branch inside the loop may be taken or not, so the paths a warp takes now and then
(a lane's copy issue, a pipe's refill, a barrier's retry) drop out and the decode, the MMAs and
the ring's bookkeeping stay. It is a lower bound of what a warp issues per iteration, and what
variants of one kernel are compared by. "instr/MMA" is per MMA instruction: per k16 step for
wgmma, per m16n8k16 (one n8 tile) for mma.sync.

cuobjdump comes from $CUOBJDUMP, PATH, $CUDA_HOME/bin or /usr/local/cuda/bin.
"""
import os
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);")
KERNEL = re.compile(r"grouped_gemm_(\w+)_kernel<([^>]*)>")


def cuobjdump():
    candidates = [os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump")]
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "cuobjdump"))
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    sys.exit("sass_loops: cuobjdump not found (set CUOBJDUMP, or put the CUDA toolkit's bin on PATH)")


def demangle(names):
    if not shutil.which("c++filt"):
        return names
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def short_name(demangled):
    m = KERNEL.search(demangled)
    if not m:
        return None
    args = [a.strip() for a in m.group(2).split(",")]
    args = ["v2" if a == "true" else "v1" if a == "false" else a for a in args]
    return f"{m.group(1)}<{','.join(args)}>"


def functions(path):
    """{kernel: [(address, opcode, operands, conditional)]} for the grouped GEMM kernels in `path`."""
    sass = subprocess.run([cuobjdump(), "-sass", path], capture_output=True, text=True)
    if sass.returncode != 0:
        sys.exit(f"sass_loops: cuobjdump could not read {path}: {sass.stderr.strip().splitlines()[-1:]}")
    mangled, bodies = [], []
    for line in sass.stdout.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            mangled.append(m.group(1))
            bodies.append([])
            continue
        m = INSTRUCTION.search(line)
        if m and bodies:
            # (address, opcode, operands, conditional): a guard predicate, a BRA's own predicate
            # operand (`BRA P0, target`) or `.ANY` / `.DIV` make a branch conditional.
            opcode, operands = m.group(3), m.group(4)
            conditional = bool(m.group(2)) or bool(re.match(r"\s*!?U?P[T0-9]", operands)) or ".ANY" in opcode
            bodies[-1].append((int(m.group(1), 16), opcode, operands, conditional))
    result = {}
    for name, body in zip(demangle(mangled), bodies):
        short = short_name(name)
        if short:
            result[short] = body
    return result


def branch_target(body, index, i):
    """The index a branch at body[i] goes to, or None (not a branch, or a target outside body)."""
    _, opcode, operands, _ = body[i]
    m = re.search(r"0x([0-9a-f]+)", operands) if opcode.startswith("BRA") else None
    return index.get(int(m.group(1), 16)) if m else None


def forward_path(body, index, first, last):
    """The fewest instructions from `first` to `last` (indices into body, both on the path), or
    None: every forward branch inside [first, last] may be taken or not (an unpredicated one always
    is); branches out of it (a barrier's retry path) and inner loops' branches back count as not
    taken."""
    parent = {first: None}
    cost = {first: 1}
    for i in range(first, last):
        if i not in cost:
            continue
        target = branch_target(body, index, i)
        inside = target is not None and i < target <= last
        successors = [target] if inside else []
        if not inside or body[i][3]:
            successors.append(i + 1)
        for j in successors:
            if cost.get(j, 1 << 30) > cost[i] + 1:
                cost[j] = cost[i] + 1
                parent[j] = i
    if last not in cost:
        return None
    path = [last]
    while parent[path[-1]] is not None:
        path.append(parent[path[-1]])
    return path[::-1]


def is_mma(opcode):
    return opcode.startswith(("HMMA", "HGMMA"))


def shortest_path(body, index, first, last):
    """The shortest way through the loop [first, last] that passes every MMA in it (indices): a
    lower bound of what a warp doing the loop's work issues per iteration."""
    waypoints = [first] + [i for i in range(first, last + 1) if is_mma(body[i][1])] + [last]
    path = [first]
    for a, b in zip(waypoints, waypoints[1:]):
        if a != b:
            segment = forward_path(body, index, a, b)
            if segment is None:
                return []
            path += segment[1:]
    return path


def mma_loops(body):
    """[(path, mma_count, mma_opcode)] of the innermost MMA loops, in address order: `path` the
    indices of the shortest way through the loop's work (shortest_path)."""
    index = {address: i for i, (address, _, _, _) in enumerate(body)}
    spans = []
    for i in range(len(body)):
        target = branch_target(body, index, i)
        span = [op for _, op, _, _ in body[target: i + 1]] if target is not None and target < i else []
        # A span with an EXIT is not a loop: the branch back is the end of a barrier's retry stub,
        # placed after the kernel's code.
        if any(is_mma(op) for op in span) and not any(op.startswith("EXIT") for op in span):
            spans.append((target, i))
    innermost = [a for a in spans if not any(b != a and a[0] <= b[0] and b[1] <= a[1] for b in spans)]
    loops = []
    for first, last in sorted(innermost):
        mmas = [op for _, op, _, _ in body[first: last + 1] if is_mma(op)]
        loops.append((shortest_path(body, index, first, last), len(mmas), mmas[0]))
    return loops


def main(argv):
    per_loop = "--loops" in argv
    argv = [a for a in argv if a != "--loops"]
    show = None
    if argv[:1] == ["--path"]:
        if len(argv) < 4 or not argv[2].isdigit():
            sys.exit("sass_loops: --path takes KERNEL LOOP FILE... (KERNEL as printed, e.g. 'wgmma<v2,4,1>')")
        show = (argv[1], int(argv[2]))
        argv = argv[3:]
    files = argv
    if not files:
        sys.exit(__doc__.strip().split("\n\n")[1])
    columns = []
    for arg in files:
        label, _, path = arg.partition("=") if "=" in arg else (os.path.basename(arg), "", arg)
        if not os.path.exists(path):
            sys.exit(f"sass_loops: {path}: no such file")
        bodies = functions(path)
        if show is None:
            columns.append((label, {k: mma_loops(v) for k, v in bodies.items()}))
            continue
        kernel, n = show
        body = bodies.get(kernel, [])
        loops = mma_loops(body)
        if n >= len(loops):
            sys.exit(f"sass_loops: {path} has no MMA loop {n} in {kernel} ({len(loops)} loops)")
        print(f"{label}: {kernel} loop {n}, {len(loops[n][0])} instructions on the shortest path")
        for i in loops[n][0]:
            address, opcode, operands, conditional = body[i]
            print(f"  {address:#07x} {'?' if conditional else ' '} {opcode}{operands}")
    if show is not None:
        return
    kernels = sorted({k for _, table in columns for k in table})
    if not kernels:
        sys.exit("sass_loops: no grouped GEMM kernel in " + ", ".join(files))
    header = f"{'kernel':<18} {'loop':>4} {'MMA':<16}" if per_loop else f"{'kernel':<18} {'loops':>5}"
    print(header + "".join(f" {label[:22]:>22}" for label, _ in columns))
    print(" " * len(header) + "".join(f" {'instr  MMA instr/MMA':>22}" for _ in columns))

    def cell(instr, mma):
        return f" {instr:>7} {mma:>4} {instr / mma:>9.2f}" if mma else f" {'-':>22}"

    for kernel in kernels:
        if per_loop:
            count = max(len(table.get(kernel, [])) for _, table in columns)
            for n in range(count):
                shapes = [t[kernel][n][2] for _, t in columns if n < len(t.get(kernel, []))]
                row = f"{kernel:<18} {n:>4} {shapes[0][:16]:<16}"
                for _, table in columns:
                    loops = table.get(kernel, [])
                    row += cell(len(loops[n][0]), loops[n][1]) if n < len(loops) else cell(0, 0)
                print(row)
        else:
            row = f"{kernel:<18} {max(len(t.get(kernel, [])) for _, t in columns):>5}"
            for _, table in columns:
                loops = table.get(kernel, [])
                row += cell(sum(len(l[0]) for l in loops), sum(l[1] for l in loops))
            print(row)


if __name__ == "__main__":
    main(sys.argv[1:])
