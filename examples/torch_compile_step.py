"""A torch.compile(mode="reduce-overhead") model step, replayed by PyTorch's CUDA graph trees, for
`tpgraph trace`.

    tpgraph trace -- python3 examples/torch_compile_step.py --steps 500

The model is a small transformer block (attention through scaled_dot_product_attention, an MLP,
layer norms) in bf16; Inductor compiles it to Triton kernels and cuBLAS calls, and the
reduce-overhead mode captures each step as one CUDA graph.
"""
import argparse
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="steps after the warm-up (>= 1)")
    parser.add_argument("--dim", type=int, default=1024, help="model width (a multiple of 64)")
    args = parser.parse_args()
    if args.steps < 1 or args.dim < 64 or args.dim % 64:
        parser.error("--steps must be >= 1 and --dim a multiple of 64")
    torch.manual_seed(0)
    model = Block(args.dim, args.dim // 64).cuda().to(torch.bfloat16).eval()
    step = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(4, 128, args.dim, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(5):
            y = step(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            y = step(x)
        torch.cuda.synchronize()
    us = (time.perf_counter() - start) / args.steps * 1e6
    print(f"torch_compile_step.py: {args.steps} steps, {us:.1f} us per step (checksum {float(y.float().sum()):.3f})",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
