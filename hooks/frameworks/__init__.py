"""One module per framework; this registry is the only place that maps a kind to its behaviour."""

from __future__ import annotations

from hooks.frameworks.base import Framework
from hooks.frameworks.jax import Jax
from hooks.frameworks.mpi import MPI
from hooks.frameworks.mxnet import MXNet
from hooks.frameworks.paddle import Paddle
from hooks.frameworks.pytorch import PyTorch
from hooks.frameworks.tensorflow import TensorFlow
from hooks.frameworks.xgboost import XGBoost

FRAMEWORKS: dict[str, Framework] = {
    fw.info.kind: fw for fw in (TensorFlow(), PyTorch(), XGBoost(), MPI(), Paddle(), Jax(), MXNet())
}


def framework(kind: str) -> Framework:
    return FRAMEWORKS[kind]
