"""A jitted JAX step whose body holds a lax.fori_loop and a lax.cond, for `tpgraph trace`.

    tpgraph trace -- python3 examples/jax_loop_cond.py --steps 200

XLA builds CUDA graphs node by node ("command buffers"). With the flags below it puts fusions,
GEMMs, the while loop and the conditional into them: the loop becomes a conditional WHILE node
and the branch a conditional IF/SWITCH node, each with body graphs, and some edges carry data.
A user's own XLA_FLAGS win.
"""
import argparse
import os
import time

os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,WHILE,CONDITIONAL "
    "--xla_gpu_graph_min_graph_size=1",
)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402


@jax.jit
def step(x, w):
    def body(i, x):
        y = jnp.tanh(x @ w)
        return lax.cond(i % 2 == 0, lambda y: y * 1.5, lambda y: y - 0.25, y)

    x = lax.fori_loop(0, 4, body, x)
    return x / (jnp.sqrt(jnp.sum(x * x)) + 1.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps after the warm-up (>= 1)")
    parser.add_argument("--size", type=int, default=1024, help="matrix size (>= 16)")
    args = parser.parse_args()
    if args.steps < 1 or args.size < 16:
        parser.error("--steps must be >= 1 and --size >= 16")
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (args.size, args.size), dtype=jnp.float32)
    w = jax.random.normal(jax.random.PRNGKey(1), (args.size, args.size), dtype=jnp.float32) / args.size**0.5
    for _ in range(3):
        x = step(x, w)
    x.block_until_ready()
    start = time.perf_counter()
    for _ in range(args.steps):
        x = step(x, w)
    x.block_until_ready()
    us = (time.perf_counter() - start) / args.steps * 1e6
    print(f"jax_loop_cond.py: {args.steps} steps, {us:.1f} us per step", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
