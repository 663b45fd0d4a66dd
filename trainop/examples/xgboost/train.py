"""Distributed XGBoost with Kubeflow's XGBoostJob env: the master runs the collective tracker, every rank
trains on its own shard of scikit-learn's bundled breast-cancer data, and the histogram all-reduce makes
them grow one and the same model.

Env (set by the operator): MASTER_ADDR, MASTER_PORT (the tracker), WORLD_SIZE, RANK. Rank 0 writes a
JSON result to $RESULT_PATH when set; every rank exits 1 if test accuracy misses $ACCURACY_TARGET
(default 0.93).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import sys

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_breast_cancer
from xgboost import collective
from xgboost.tracker import RabitTracker

SEED = 0
ROUNDS = 40
TEST_FRACTION = 0.25


def log(rank: int, world: int, message: str) -> None:
    print(f"rank {rank}/{world}: {message}", flush=True)


def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(SEED).permutation(len(x))
    x, y = x[order], y[order]
    cut = int(len(x) * (1 - TEST_FRACTION))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def bind_address(master_addr: str) -> str:
    """The tracker listens on MASTER_ADDR when it is an IP (`trainop run`), on every interface otherwise
    (on a cluster MASTER_ADDR is the master's Service name, which resolves to this pod)."""
    try:
        ipaddress.ip_address(master_addr)
    except ValueError:
        return "0.0.0.0"
    return master_addr


def main() -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    master, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    tracker = None
    if rank == 0:
        tracker = RabitTracker(
            n_workers=world, host_ip=bind_address(master), port=port, sortby="task", timeout=300
        )
        tracker.start()
        log(rank, world, f"tracker listening on {bind_address(master)}:{port}")
    x_train, y_train, x_test, y_test = split()
    xs, ys = x_train[rank::world], y_train[rank::world]
    # Zero-padded task ids sort like the ranks, so the collective's rank is Kubeflow's RANK.
    # Workers may start before the tracker listens (pods start in any order): retry the connection.
    args: dict[str, int | str | None] = {
        "dmlc_tracker_uri": master,
        "dmlc_tracker_port": port,
        "dmlc_task_id": f"{rank:05d}",
        "dmlc_retry": 30,
    }
    with collective.CommunicatorContext(**args):
        assert collective.get_rank() == rank and collective.get_world_size() == world
        log(rank, world, f"joined the collective with a shard of {len(xs)} of {len(x_train)} rows")
        params = {
            "objective": "binary:logistic",
            "tree_method": "hist",
            "max_depth": 3,
            "eta": 0.3,
            "nthread": 1,
        }
        booster = xgb.train(params, xgb.DMatrix(xs, label=ys), num_boost_round=ROUNDS)
        accuracy = float(((booster.predict(xgb.DMatrix(x_test)) > 0.5) == y_test).mean())
        # One model: the same bytes on every rank. Sum each rank's digest bit pattern and compare.
        digest = np.frombuffer(hashlib.sha256(bytes(booster.save_raw("json"))).digest()[:8], dtype=np.uint8)
        same_model = bool(
            np.array_equal(
                collective.allreduce(digest.astype(np.float64), collective.Op.MAX),
                collective.allreduce(digest.astype(np.float64), collective.Op.MIN),
            )
        )
        seen = collective.allreduce(np.eye(world)[rank], collective.Op.SUM)
    target = float(os.environ.get("ACCURACY_TARGET", "0.93"))
    ranks = [i for i, v in enumerate(seen) if v == 1]
    log(
        rank,
        world,
        f"test accuracy {accuracy:.4f} (target {target:.2f}), same model on all ranks: {same_model}",
    )
    if tracker is not None:
        tracker.wait_for(timeout=120)
        if os.environ.get("RESULT_PATH"):
            result = {
                "accuracy": accuracy,
                "target": target,
                "world_size": world,
                "ranks": ranks,
                "same_model": same_model,
            }
            with open(os.environ["RESULT_PATH"], "w") as f:
                json.dump(result, f, indent=2)
    return 0 if accuracy >= target and same_model and ranks == list(range(world)) else 1


if __name__ == "__main__":
    sys.exit(main())
