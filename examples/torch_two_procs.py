"""Two processes on one GPU, each replaying its own captured two-stream graph, for `tpgraph trace`.

    tpgraph trace -- python3 examples/torch_two_procs.py --replays 200

The parent never touches CUDA; each child (a fresh interpreter: the spawn start method) captures
and replays the graph of torch_two_stream.py. The GPU time-slices the two, so their windows
overlap while their kernels rarely run at the same time.
"""
import argparse
import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_two_stream  # noqa: E402


def worker(index: int, replays: int, size: int, barrier) -> None:
    import torch

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    graph, _ = torch_two_stream.build(size, device)
    barrier.wait()  # both replay at the same time
    us = torch_two_stream.replay(graph, replays, device)
    print(f"torch_two_procs.py: process {index} (pid {os.getpid()}): {replays} replays, {us:.1f} us per replay",
          flush=True)
    torch.cuda.synchronize(device)
    # Neither exits before both have finished their work: a host time taken by either after this
    # point is later than every kernel end of both (how a shared time base is checked).
    barrier.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=100, help="graph replays per process (>= 1)")
    parser.add_argument("--size", type=int, default=2048, help="matrix size (>= 16)")
    args = parser.parse_args()
    if args.replays < 1 or args.size < 16:
        parser.error("--replays must be >= 1 and --size >= 16")
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=worker, args=(i, args.replays, args.size, barrier)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        print(f"torch_two_procs.py: a process failed (exit codes {failed})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
