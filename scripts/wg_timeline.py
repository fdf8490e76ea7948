#!/usr/bin/env python3
"""Reads the wgmma kernel's block timeline (src/kernels/wg_timeline.cuh, a build with
-DTPGRAPH_WG_TIMELINE=R) and says where one launch of each grouped GEMM spends its SMs' time.

    scripts/wg_timeline.py wg-timeline.txt [--core TFLOPS] [--sms N] [--block-rows R]

Per GEMM (one recorded launch): the span from the first block's start of work (its prerequisite
grids complete) to the last block's end, and the SM-time of that span split into
  - loop: blocks in their chunk loop (the decode, the wgmmas and the ring's and pipes' waits),
  - stores: blocks after their chunk loop (the last row block's staged outputs),
  - between: an SM between two of its blocks (the next block's launch and prologue: barriers,
    scales, the first copies),
  - tail: an SM idle after its last block until the launch's end,
  - head: an SM idle before its first block starts work.
The loop's rate is the MMA work issued (rows padded to 16, as the tensor cores run them) per loop
time (R weight rows a block: 256 for tile 4, 128 for tile 3); --core gives the rate of the compute
core alone (decode + wgmma, no waits) for comparison. The loop's time per chunk of 64 columns
against N, with the line a + b N through it, says how much of a chunk's time is a cost per chunk
(a) and how much grows with the routed rows (b, beside the tensor cores' own need per routed row).
"""
import argparse
import collections
import sys


def read(path):
    rows = []
    with open(path) as f:
        header = f.readline().split()
        for line in f:
            values = [int(v) for v in line.split()]
            if len(values) == len(header):
                rows.append(dict(zip(header, values)))
    return rows


def analyse(blocks, sms, core, block_rows):
    first = min(b["ready_ns"] for b in blocks)
    last = max(b["end_ns"] for b in blocks)
    span = last - first
    # The SM clock per nanosecond, over every block (globaltimer ticks coarsely; the sum is steady).
    ghz = sum(b["end_clk"] - b["ready_clk"] for b in blocks) / max(1, sum(b["end_ns"] - b["ready_ns"] for b in blocks))
    parts = collections.Counter()
    by_sm = collections.defaultdict(list)
    for b in blocks:
        by_sm[b["sm"]].append(b)
        loop_ns = (b["loop_clk"] - b["ready_clk"]) / ghz
        store_ns = (b["end_clk"] - b["loop_clk"]) / ghz
        parts["loop"] += loop_ns
        parts["stores"] += store_ns
    used = len(by_sm)
    for sm_blocks in by_sm.values():
        sm_blocks.sort(key=lambda b: b["ready_ns"])
        parts["head"] += sm_blocks[0]["ready_ns"] - first
        parts["tail"] += last - sm_blocks[-1]["end_ns"]
        for a, b in zip(sm_blocks, sm_blocks[1:]):
            parts["between"] += max(0, b["ready_ns"] - a["end_ns"])
    total = (sms if sms else used) * span
    parts["unused SMs"] = max(0, (sms - used) * span) if sms else 0
    flops = 0
    loop_rate = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])  # N -> blocks, flops, loop ns, chunks
    for b in blocks:
        n = (b["rows"] + 15) // 16 * 16
        f = 2.0 * block_rows * n * 64 * b["chunks"] * b["items"]
        flops += f
        entry = loop_rate[n]
        entry[0] += 1
        entry[1] += f
        entry[2] += (b["loop_clk"] - b["ready_clk"]) / ghz
        entry[3] += b["chunks"] * b["items"]
    firsts = {id(sm_blocks[0]) for sm_blocks in by_sm.values()}
    waited = [b["ready_ns"] - b["start_ns"] for b in blocks if id(b) in firsts]
    prologue = [(b["ready_clk"] - b["start_clk"]) / ghz for b in blocks if id(b) not in firsts]
    lines = [
        f"  {len(blocks)} blocks (grid {blocks[0]['grid']}) on {used} SMs, {span / 1e3:.1f} us from the first "
        f"block's work to the last block's end, SM clock {ghz:.3f} GHz; an SM's first block waited "
        f"{sum(waited) / max(1, len(waited)) / 1e3:.1f} us on average for the prerequisite grids (launched "
        f"early), the others took {sum(prologue) / max(1, len(prologue)) / 1e3:.2f} us from start to work",
        f"  MMA work issued {flops / 1e12:.3f} TFLOP: {flops / span / 1e3:.1f} TFLOP/s over the span",
        "  SM-time of the span: "
        + ", ".join(f"{k} {100.0 * v / total:.1f}%" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v > 0),
    ]
    per_sm = []
    for n in sorted(loop_rate):
        count, f, ns, _ = loop_rate[n]
        rate = f / ns / 1e3 * (sms if sms else used)  # TFLOP/s, as if every SM ran such loops
        note = f" ({100.0 * rate / core:.0f}% of the core)" if core else ""
        per_sm.append(f"N={n}: {count} blocks, {rate:.0f}{note}")
    lines.append("  the loop's rate in TFLOP/s, every SM at it: " + "; ".join(per_sm))
    lines.extend(chunk_cost(loop_rate, ghz, block_rows))
    mean = lambda key_a, key_b: sum((b[key_b] - b[key_a]) / ghz for b in blocks) / len(blocks) / 1e3
    lines.append(
        f"  per block on average: loop {mean('ready_clk', 'loop_clk'):.1f} us, after the loop "
        f"{mean('loop_clk', 'end_clk'):.1f} us"
    )
    if "wait_full" in blocks[0]:
        loop_clk = sum(b["loop_clk"] - b["ready_clk"] for b in blocks)
        share = lambda key: 100.0 * sum(b[key] for b in blocks) / max(1, loop_clk)
        lines.append(
            f"  thread 0's loop cycles waiting: for the routed rows (full) {share('wait_full'):.1f}%, for its "
            f"weights (fragment loads) {share('wait_pipe'):.1f}%, for a stage to refill (empty) "
            f"{share('wait_empty'):.1f}%; the rest {100.0 - share('wait_full') - share('wait_pipe') - share('wait_empty'):.1f}% "
            "decodes, issues and waits for its wgmmas"
            + (", and stores the row blocks before the last" if max(b["items"] for b in blocks) > 1 else "")
        )
    return lines


def chunk_cost(loop_rate, ghz, block_rows):
    """A block's loop time per chunk of 64 columns against its routed rows N: the least-squares line
    a + b N over the blocks (each N weighted by its chunks), beside the tensor cores' own need,
    block_rows / 32 cycles per routed row (4 k16 steps of N / 2 cycles per 64-row warpgroup)."""
    points = [(n, ns / chunks, chunks) for n, (_, _, ns, chunks) in loop_rate.items() if chunks > 0]
    if len(points) < 2:
        return []
    w = sum(c for _, _, c in points)
    mn = sum(n * c for n, _, c in points) / w
    mt = sum(t * c for _, t, c in points) / w
    var = sum(c * (n - mn) ** 2 for n, _, c in points)
    if var == 0:
        return []
    slope = sum(c * (n - mn) * (t - mt) for n, t, c in points) / var
    fixed = mt - slope * mn
    tensor = block_rows / 32 / ghz  # ns per routed row
    per_n = ", ".join(f"N={n} {t / 1e3:.2f}" for n, t, _ in sorted(points))
    return [
        f"  the loop per chunk of 64 columns, in us: {per_n}; the line through them {fixed / 1e3:.2f} us "
        f"+ {slope / 1e3:.4f} us per routed row, where the tensor cores need {tensor / 1e3:.4f} us per "
        f"routed row ({block_rows // 32} cycles) and nothing per chunk"
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--core", type=float, default=0.0, help="TFLOP/s of the compute core alone")
    parser.add_argument("--sms", type=int, default=0, help="the GPU's SMs (default: the SMs used)")
    parser.add_argument("--block-rows", type=int, default=256, help="weight rows a block computes (the tile's)")
    args = parser.parse_args()
    try:
        records = read(args.path)
    except (OSError, ValueError) as e:
        print(f"wg_timeline: cannot read {args.path}: {e}", file=sys.stderr)
        return 2
    if not records:
        print(f"{args.path}: no recorded blocks", file=sys.stderr)
        return 1
    by_gemm = collections.defaultdict(list)
    for r in records:
        by_gemm[r["gemm"]].append(r)
    for gemm, blocks in sorted(by_gemm.items()):
        k = blocks[0]["chunks"] * 64
        items = max(b["items"] for b in blocks)
        print(f"GEMM {gemm} (K {k}, up to {items} row blocks per block):")
        print("\n".join(analyse(blocks, args.sms, args.core, args.block_rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
