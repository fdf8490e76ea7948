"""One process per GPU (torchrun), each replaying a captured graph with an NCCL all-reduce between
two GEMMs, for `tpgraph trace`:

    tpgraph trace -- torchrun --nproc-per-node 2 examples/torch_allreduce_graph.py --replays 100

With --nproc-per-node 1 it runs on one GPU: NCCL then has nothing to exchange (an in-place sum of
one rank), and the graph holds the two GEMMs and whatever NCCL launches for a single rank.
NVLink SHARP (NVLS) is switched off: its buffers are registered at capture time in a way that
needs multicast support on the machine.
"""
import argparse
import os
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=100, help="graph replays (>= 1)")
    parser.add_argument("--size", type=int, default=4096, help="matrix size (>= 16)")
    args = parser.parse_args()
    if args.replays < 1 or args.size < 16:
        parser.error("--replays must be >= 1 and --size >= 16")
    if "LOCAL_RANK" not in os.environ:
        print("torch_allreduce_graph.py: run it under torchrun (LOCAL_RANK is not set)", file=sys.stderr)
        return 2
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    rank = dist.get_rank()

    gen = torch.Generator(device=device).manual_seed(rank)
    x = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16, generator=gen)
    w1 = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16, generator=gen) / args.size
    w2 = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16, generator=gen) / args.size

    def step():
        h = x @ w1
        dist.all_reduce(h)
        return h @ w2

    # The communicator and cuBLAS are set up eagerly, outside capture.
    warm = torch.cuda.Stream(device=device)
    warm.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(warm):
        for _ in range(2):
            step()
    torch.cuda.current_stream(device).wait_stream(warm)
    torch.cuda.synchronize(device)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    graph.replay()
    torch.cuda.synchronize(device)
    dist.barrier()

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.replays):
        graph.replay()
    end.record()
    end.synchronize()
    us = start.elapsed_time(end) * 1000.0 / args.replays
    print(f"torch_allreduce_graph.py: rank {rank}/{dist.get_world_size()}: {args.replays} replays, "
          f"{us:.1f} us per replay", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
