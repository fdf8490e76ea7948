"""A PyTorch program for `tpgraph trace`: a CUDA graph captured across two streams, replayed N times.

    tpgraph trace -- python3 examples/torch_two_stream.py --replays 200

The main stream runs two GEMMs, a side stream forked from it runs a GEMM and an activation, and the
main stream joins the side stream before the last add. The script knows nothing of tpgraph.
"""
import argparse
import sys

import torch


def build(size: int, device: torch.device):
    """Captures the two-stream graph; returns (graph, output) ready to replay."""
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen)
    w1 = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen)
    w2 = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen)
    side = torch.cuda.Stream(device=device)

    def step():
        main = torch.cuda.current_stream(device)
        side.wait_stream(main)
        y = (x @ w1) @ w1
        with torch.cuda.stream(side):
            z = torch.relu(x @ w2)
        main.wait_stream(side)
        return y + z

    # Warm up on a side stream before capture, as torch.cuda.graphs asks (cuBLAS workspaces).
    warm = torch.cuda.Stream(device=device)
    warm.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(warm):
        for _ in range(2):
            step()
    torch.cuda.current_stream(device).wait_stream(warm)
    torch.cuda.synchronize(device)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    return graph, out


def replay(graph, replays: int, device: torch.device) -> float:
    """Replays the graph; returns the mean wall time per replay in microseconds (GPU events)."""
    graph.replay()
    torch.cuda.synchronize(device)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / replays


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=100, help="graph replays (>= 1)")
    parser.add_argument("--size", type=int, default=2048, help="matrix size (>= 16)")
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    args = parser.parse_args(argv)
    if args.replays < 1 or args.size < 16:
        parser.error("--replays must be >= 1 and --size >= 16")
    if not torch.cuda.is_available():
        print("torch_two_stream.py: no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    graph, _ = build(args.size, device)
    us = replay(graph, args.replays, device)
    print(f"torch_two_stream.py: {args.replays} replays of a two-stream graph ({args.size}^2 bf16), "
          f"{us:.1f} us per replay")
    return 0


if __name__ == "__main__":
    sys.exit(main())
