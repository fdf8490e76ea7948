"""Per-kernel median durations of examples/torch_two_stream.py's graph as torch.profiler sees them.

Used to check `tpgraph trace`'s fidelity (docs/benchmarks.md): the same script, run separately under
torch.profiler, must give the same per-kernel medians (within 3%). Prints JSON: {kernel name: median µs}.
"""
import json
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import torch_two_stream  # noqa: E402


def main() -> int:
    replays = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    graph, _ = torch_two_stream.build(2048, device)
    graph.replay()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize(device)
    durations = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            durations.setdefault(event.name, []).append(event.device_time)
    print(json.dumps({name: {"median_us": statistics.median(v), "count": len(v)} for name, v in durations.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
