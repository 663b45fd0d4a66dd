#!/usr/bin/env bash
# Install what the examples need to run with `trainop run`, for the given frameworks (default: all).
# Idempotent: a framework that already imports is skipped, so CI on a prepared machine costs seconds.
#
#   hack/install-examples.sh                 # everything
#   hack/install-examples.sh pytorch xgboost # just these
#
# Costs measured on a 2-core CI machine (download / install):
#   pytorch  torch from PyPI: the Linux wheel needs the CUDA runtime wheels even on CPU (`--no-deps`
#            fails at `import torch` on libcudart), 2.8 GB / ~75 s + ~150 s; 5.5 GB on disk.
#   xgboost  xgboost-cpu: 5 MB, seconds.           jax  jax + jaxlib: 85 MB, ~12 s.
#   mpi      Debian openmpi-bin + libopenmpi-dev: 24 MB, ~20 s; mpi4py wheel 1.3 MB (uses Debian's libmpi).
#   common   numpy + scikit-learn (+ scipy): ~45 MB, ~40 s.
#   tensorflow  tensorflow-cpu (the tensorflow-ps example and the default parameter server): ~2 min to
#            install here, 1.4 GB on disk. The rendezvous example needs none of it.
#   paddle, mxnet: nothing (their examples rendezvous with the standard library).
set -euo pipefail

PYTHON=${PYTHON:-python3}
frameworks=("$@")
[ ${#frameworks[@]} -gt 0 ] || frameworks=(pytorch xgboost jax mpi tensorflow)

has() { "$PYTHON" -c "import $1" 2>/dev/null; }

pip_install() { "$PYTHON" -m pip install --quiet --disable-pip-version-check "$@"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

has sklearn || pip_install numpy scikit-learn

for framework in "${frameworks[@]}"; do
  case "$framework" in
    # tensorboard: the example writes scalars with `trainop run --tensorboard` (tests/local/test_tensorboard*.py).
    pytorch) has torch || pip_install torch; has tensorboard || pip_install tensorboard ;;
    xgboost) has xgboost || pip_install 'xgboost-cpu>=2' ;;
    jax) has jax || pip_install jax jaxlib ;;
    mpi)
      if ! command -v mpirun >/dev/null; then
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          openmpi-bin libopenmpi-dev >/dev/null
      fi
      has mpi4py || pip_install mpi4py
      ;;
    tensorflow) has tensorflow || pip_install tensorflow-cpu ;;
    paddle | mxnet) ;;
    *) echo "install-examples.sh: unknown framework '$framework'" >&2; exit 2 ;;
  esac
done
