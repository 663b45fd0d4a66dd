"""The one table of kinds: each framework module holds everything specific to its kind, registered here.

Nothing outside this package names a kind or a replica type; generic code asks the registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from trainop.api.kinds import KindInfo, UnknownKindError
from trainop.frameworks.base import Framework
from trainop.frameworks.jax import Jax
from trainop.frameworks.mpi import MPI
from trainop.frameworks.mxnet import MXNet
from trainop.frameworks.paddle import Paddle
from trainop.frameworks.pytorch import PyTorch
from trainop.frameworks.tensorflow import TensorFlow
from trainop.frameworks.xgboost import XGBoost

FRAMEWORKS: Mapping[str, Framework] = MappingProxyType(
    {fw.info.kind: fw for fw in (TensorFlow(), PyTorch(), XGBoost(), MPI(), Paddle(), Jax(), MXNet())}
)
KINDS: Mapping[str, KindInfo] = MappingProxyType({kind: fw.info for kind, fw in FRAMEWORKS.items()})
# A Trainer v2 runtime's mlPolicy source -> the framework that knows its contract in both API generations.
ML_POLICIES: Mapping[str, Framework] = MappingProxyType(
    {"torch": FRAMEWORKS["PyTorchJob"], "jax": FRAMEWORKS["JAXJob"], "xgboost": FRAMEWORKS["XGBoostJob"]}
)


def framework(kind: str) -> Framework:
    try:
        return FRAMEWORKS[kind]
    except KeyError:
        raise UnknownKindError(
            f"unknown kind {kind!r}; expected one of {', '.join(KINDS)} (apiVersion kubeflow.org/v1)"
        ) from None


def kind_info(kind: str) -> KindInfo:
    return framework(kind).info
