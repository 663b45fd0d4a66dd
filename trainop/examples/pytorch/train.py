"""PyTorch DDP: a small MLP on scikit-learn's bundled digits, each rank training on its own shard.

Kubeflow's PyTorchJob sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK; `init_process_group` reads
them (env://). DDP all-reduces the gradients after every backward pass, so the ranks stay one model.
Rank 0 writes a JSON result to $RESULT_PATH when it is set, and every rank exits 1 if the test accuracy
misses $ACCURACY_TARGET (default 0.90).

With $TENSORBOARD_LOG_DIR set (the annotation trainop.dev/tensorboard, or `trainop run --tensorboard`, gives
every pod a directory of its own) each rank writes TensorBoard scalars there: `train/loss` and
`train/accuracy` of its shard every epoch, `test/accuracy` of the whole test set at the end. Without it
nothing is written and the tensorboard package is not needed.

The backend follows the devices the pod was given: NCCL on the first visible CUDA device when torch sees
one (the pod asked for a GPU: `nvidia.com/gpu`, or `amd.com/gpu` with a ROCm build), else gloo on the CPU.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SEED = 0
EPOCHS = 60
BATCH = 32
TEST_FRACTION = 0.2


def log(rank: int, world: int, message: str) -> None:
    print(f"rank {rank}/{world}: {message}", flush=True)


def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The same train/test split on every rank (a fixed seed), pixels scaled to [0, 1]."""
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(SEED).permutation(len(x))
    x, y = x[order].astype(np.float32) / 16.0, y[order]
    cut = int(len(x) * (1 - TEST_FRACTION))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def device() -> torch.device:
    """The pod's device: one process per pod, so the first CUDA device it may see (LOCAL_RANK's under
    torchrun, which starts one process per device), else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def summary_writer():  # -> torch.utils.tensorboard.SummaryWriter | None
    """A writer into $TENSORBOARD_LOG_DIR, or None when it is not set."""
    log_dir = os.environ.get("TENSORBOARD_LOG_DIR")
    if not log_dir:
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=log_dir)


def main() -> int:
    where = device()
    backend = "nccl" if where.type == "cuda" else "gloo"
    if os.environ.get("MASTER_ADDR", "").startswith("127."):
        # Every rank is on this machine (`trainop run`): keep the peer connections on loopback too.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        if backend == "nccl":
            os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    if where.type == "cuda":
        # NCCL (and all_gather_object over it) works on the current device: make it this rank's.
        torch.cuda.set_device(where)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    x_train, y_train, x_test, y_test = split()
    # Each rank sees only its shard; the gradient all-reduce is what lets the model learn from all of them.
    xs, ys = torch.from_numpy(x_train[rank::world]), torch.from_numpy(y_train[rank::world])
    log(
        rank, world, f"{socket.gethostname()} pid {os.getpid()}, shard of {len(xs)} of {len(x_train)} samples"
    )
    if where.type == "cuda":
        # The machine's GPU behind cuda:0 is in CUDA_VISIBLE_DEVICES (hack/gpu-check.sh checks they differ).
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all")
        name = torch.cuda.get_device_name(where)
        log(rank, world, f"backend {backend} on {where} ({name}), CUDA_VISIBLE_DEVICES={visible}")
        xs, ys = xs.to(where), ys.to(where)

    torch.manual_seed(SEED)
    layers = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(where)
    model = DistributedDataParallel(layers, device_ids=[where] if where.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(SEED + rank)
    # Equal step counts on every rank: DDP needs each backward pass matched by all ranks.
    steps = len(x_train) // world // BATCH
    writer = summary_writer()
    for epoch in range(1, EPOCHS + 1):
        order = torch.randperm(len(xs), generator=generator).to(where)
        total, correct = 0.0, 0
        for step in range(steps):
            batch = order[step * BATCH : (step + 1) * BATCH]
            optimizer.zero_grad()
            out = model(xs[batch])
            loss = loss_fn(out, ys[batch])
            loss.backward()
            optimizer.step()
            total += loss.item()
            correct += int((out.argmax(1) == ys[batch]).sum().item())
        if writer is not None:
            writer.add_scalar("train/loss", total / steps, epoch)
            writer.add_scalar("train/accuracy", correct / (steps * BATCH), epoch)
        if epoch % 10 == 0:
            log(rank, world, f"epoch {epoch} loss {total / steps:.4f}")

    # Test accuracy over the whole test set, counted on each rank's share and summed.
    with torch.no_grad():
        xt, yt = (
            torch.from_numpy(x_test[rank::world]).to(where),
            torch.from_numpy(y_test[rank::world]).to(where),
        )
        counts = torch.tensor(
            [(model(xt).argmax(1) == yt).sum().item(), len(yt)], dtype=torch.float64, device=where
        )
    dist.all_reduce(counts)
    accuracy = float(counts[0] / counts[1])
    ranks: list[dict[str, int] | None] = [None] * world
    dist.all_gather_object(ranks, {"rank": rank, "pid": os.getpid(), "train_samples": len(xs)})
    target = float(os.environ.get("ACCURACY_TARGET", "0.90"))
    log(rank, world, f"test accuracy {accuracy:.4f} (target {target:.2f})")
    if writer is not None:
        writer.add_scalar("test/accuracy", accuracy, EPOCHS)
        # Flushed and closed before the exit: TensorBoard reads only what reached the file.
        writer.close()
    if rank == 0 and os.environ.get("RESULT_PATH"):
        result = {"accuracy": accuracy, "target": target, "world_size": world, "ranks": ranks}
        with open(os.environ["RESULT_PATH"], "w") as f:
            json.dump(result, f, indent=2)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if accuracy >= target else 1


if __name__ == "__main__":
    sys.exit(main())
