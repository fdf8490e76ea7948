"""A server-like PyTorch program for `tpgraph trace`'s windows, sampling and flight recorder.

    tpgraph trace --delay 20 --duration 5 -- python3 examples/server_like.py --seconds 60
    tpgraph trace --sample 100 -- python3 examples/server_like.py --seconds 60
    tpgraph trace --keep-last 200 --dump-on SIGUSR1 -- python3 examples/server_like.py --seconds 60
    tpgraph trace --profiler-range -- python3 examples/server_like.py --seconds 60 --profile-from 20 --profile-for 5

Like an inference server's decode loop: it captures one CUDA graph per batch size (8 sizes, a small
MLP block of GEMMs and elementwise kernels each, inside an NVTX range "capture bs=N"), then replays
them at random for --seconds, each step inside an NVTX range "step" and with the host work a
server does between steps (picking a batch, copying its tokens in). With --profile-from and
--profile-for it calls cudaProfilerStart/Stop (torch.cuda.profiler) around that part of the run.
At the end it prints the median step time, so a traced and an untraced run can be compared. The
script knows nothing of tpgraph.
"""
import argparse
import random
import statistics
import sys
import time

import torch

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


class Block(torch.nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.up = torch.nn.Linear(hidden, 4 * hidden, bias=False)
        self.down = torch.nn.Linear(4 * hidden, hidden, bias=False)
        self.norm = torch.nn.LayerNorm(hidden)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.up(self.norm(x))))


def capture_all(model, hidden: int, layers: int, device):
    """One graph per batch size, with its static input and output."""
    graphs = {}
    pool = None
    for bs in BATCH_SIZES:
        static_in = torch.zeros(bs, hidden, device=device, dtype=torch.bfloat16)
        warm = torch.cuda.Stream(device=device)
        warm.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(warm):
            for _ in range(2):
                model(static_in)
        torch.cuda.current_stream(device).wait_stream(warm)
        graph = torch.cuda.CUDAGraph()
        torch.cuda.nvtx.range_push(f"capture bs={bs}")
        with torch.cuda.graph(graph, pool=pool):
            static_out = model(static_in)
        torch.cuda.nvtx.range_pop()
        pool = graph.pool()
        graphs[bs] = (graph, static_in, static_out)
    return graphs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to serve")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile-from", type=float, default=None, help="cudaProfilerStart this many seconds in")
    parser.add_argument("--profile-for", type=float, default=5.0, help="... and cudaProfilerStop this long after")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("server_like.py: no CUDA device", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(*[Block(args.hidden) for _ in range(args.layers)]).to(device, torch.bfloat16)
    model.eval()
    with torch.no_grad():
        graphs = capture_all(model, args.hidden, args.layers, device)
        rng = random.Random(args.seed)
        tokens = torch.randn(max(BATCH_SIZES), args.hidden, dtype=torch.bfloat16).pin_memory()
        step_us = []
        start = time.monotonic()
        profiling = None  # None: not yet started; True: started; False: stopped
        while (now := time.monotonic() - start) < args.seconds:
            if args.profile_from is not None:
                if profiling is None and now >= args.profile_from:
                    torch.cuda.profiler.start()
                    profiling = True
                elif profiling and now >= args.profile_from + args.profile_for:
                    torch.cuda.profiler.stop()
                    profiling = False
            bs = rng.choice(BATCH_SIZES)
            graph, static_in, static_out = graphs[bs]
            t0 = time.perf_counter()
            torch.cuda.nvtx.range_push("step")
            static_in.copy_(tokens[:bs], non_blocking=True)
            graph.replay()
            static_out.sum().item()  # a server reads its result back every step
            torch.cuda.nvtx.range_pop()
            step_us.append((time.perf_counter() - t0) * 1e6)
        if profiling:
            torch.cuda.profiler.stop()
    print(f"server_like: {len(step_us)} steps over {len(BATCH_SIZES)} graphs, median step "
          f"{statistics.median(step_us):.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
