"""One module per framework; this registry is the only place that maps a kind to its behaviour."""

from __future__ import annotations

from trainop.frameworks.base import Framework
from trainop.frameworks.jax import Jax
from trainop.frameworks.mpi import MPI
from trainop.frameworks.mxnet import MXNet
from trainop.frameworks.paddle import Paddle
from trainop.frameworks.pytorch import PyTorch
from trainop.frameworks.tensorflow import TensorFlow
from trainop.frameworks.xgboost import XGBoost

FRAMEWORKS: dict[str, Framework] = {
    fw.info.kind: fw for fw in (TensorFlow(), PyTorch(), XGBoost(), MPI(), Paddle(), Jax(), MXNet())
}


def framework(kind: str) -> Framework:
    return FRAMEWORKS[kind]
