"""mpi4py on Open MPI: data-parallel logistic regression on scikit-learn's breast-cancer data, each rank
computing the gradient on its shard and `Allreduce` averaging them, so every rank holds the same model.

The launcher pod runs `mpirun ... python3 train.py`; mpirun reads the operator's hostfile
(OMPI_MCA_orte_default_hostfile). Rank 0 writes a JSON result to $RESULT_PATH when set; every rank exits
1 if the test accuracy misses $ACCURACY_TARGET (default 0.93).
"""

from __future__ import annotations

import json
import os
import socket
import sys

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_breast_cancer

SEED = 0
STEPS = 300
LEARNING_RATE = 0.5


def main() -> int:
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(SEED).permutation(len(x))
    x, y = (x[order] - x.mean(0)) / x.std(0), y[order].astype(np.float64)
    cut = int(len(x) * 0.75)
    xs, ys = x[:cut][rank::world], y[:cut][rank::world]
    print(f"rank {rank}/{world} on {socket.gethostname()}: shard of {len(xs)} of {cut} rows", flush=True)

    seen = np.zeros(world)
    comm.Allreduce(np.eye(world)[rank], seen, op=MPI.SUM)
    w = np.zeros(x.shape[1] + 1)
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-(xs @ w[1:] + w[0])))
        local = np.concatenate([[np.sum(p - ys)], xs.T @ (p - ys)])
        grad = np.empty_like(local)
        comm.Allreduce(local, grad, op=MPI.SUM)
        w -= LEARNING_RATE * grad / cut
    accuracy = float((((x[cut:] @ w[1:] + w[0]) > 0) == y[cut:]).mean())
    target = float(os.environ.get("ACCURACY_TARGET", "0.93"))
    print(
        f"rank {rank}/{world}: test accuracy {accuracy:.4f} (target {target:.2f}), ranks {seen.tolist()}",
        flush=True,
    )
    if rank == 0 and os.environ.get("RESULT_PATH"):
        with open(os.environ["RESULT_PATH"], "w") as f:
            json.dump({"accuracy": accuracy, "target": target, "world_size": world, "seen": seen.tolist()}, f)
    return 0 if accuracy >= target and seen.tolist() == [1.0] * world else 1


if __name__ == "__main__":
    sys.exit(main())
