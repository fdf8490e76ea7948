"""A CuPy stream capture (elementwise kernels and CUB reductions) replayed N times, for
`tpgraph trace`.

    tpgraph trace -- python3 examples/cupy_capture.py --replays 500

CuPy refuses cuBLAS inside a capture, so the graph holds elementwise kernels and reductions only.
"""
import argparse
import time

import cupy as cp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=500, help="graph replays (>= 1)")
    parser.add_argument("--size", type=int, default=1 << 22, help="elements (>= 1024)")
    args = parser.parse_args()
    if args.replays < 1 or args.size < 1024:
        parser.error("--replays must be >= 1 and --size >= 1024")
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.random.random((args.size,), dtype=cp.float32)
    with stream:
        y = cp.empty_like(x)
        stream.begin_capture()
        cp.multiply(cp.sin(x), 2.0, out=y)
        total = y.sum()
        scaled = cp.sqrt(cp.abs(y)) / (total + 1.0)
        peak = scaled.max()
        graph = stream.end_capture()
    graph.upload(stream)
    stream.synchronize()
    start = time.perf_counter()
    for _ in range(args.replays):
        graph.launch(stream)
    stream.synchronize()
    us = (time.perf_counter() - start) / args.replays * 1e6
    print(f"cupy_capture.py: {args.replays} replays, {us:.1f} us per replay (peak {float(peak):.4f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
