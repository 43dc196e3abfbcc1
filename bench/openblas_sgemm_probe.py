#!/usr/bin/env python3
"""OpenBLAS's sgemm (through numpy's bundled OpenBLAS 0.3.x) on the matmul shapes of
kernels/cpu:matmul_bench, for issue 39's library comparison: y[m, n] = x[m, k] @ W[n, k]^T with
W in f32. That is the "OpenBLAS sgemm on decoded tiles" option without the decode, so a lower
bound on its cost for a bf16 or quantized weight. Best of 7 timed runs of at least 0.2 s each.

    OPENBLAS_NUM_THREADS=2 python3 bench/openblas_sgemm_probe.py --shapes=576x1536 --threads=2
"""
import argparse
import os
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="576x1536", help="comma-separated NxK")
    parser.add_argument("--tokens", default="1,2,4,5,8,16", help="comma-separated m")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    import numpy as np  # pylint: disable=import-outside-toplevel  (after the thread count)

    rng = np.random.default_rng(1)
    print("%-10s %4s %10s %8s %8s" % ("shape", "m", "us/call", "GB/s", "GFLOP/s"))
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        w = rng.standard_normal((n, k), dtype=np.float32) * 0.02
        wt = np.ascontiguousarray(w.T)  # [k, n]: x @ wt is sgemm with no transpose copy
        for m in (int(v) for v in args.tokens.split(",")):
            x = rng.standard_normal((m, k), dtype=np.float32)
            y = np.empty((m, n), dtype=np.float32)
            np.matmul(x, wt, out=y)
            best = 1e30
            for _ in range(7):
                calls, start = 0, time.perf_counter()
                while True:
                    np.matmul(x, wt, out=y)
                    calls += 1
                    elapsed = time.perf_counter() - start
                    if elapsed >= 0.2:
                        break
                best = min(best, elapsed / calls)
            print("%-10s %4d %10.1f %8.2f %8.2f" % (shape, m, best * 1e6, n * k * 4 / best * 1e-9,
                                                    2.0 * m * n * k / best * 1e-9))


if __name__ == "__main__":
    main()
