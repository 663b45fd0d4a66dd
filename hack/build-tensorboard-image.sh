#!/usr/bin/env bash
# Builds the TensorBoard image (tensorboard-image/Dockerfile: TensorBoard and boto3 without TensorFlow,
# every wheel pinned and hashed in tensorboard-image/requirements.lock) by hack/build-image.sh's route,
# with its conventions:
#
#   hack/build-tensorboard-image.sh [--save PATH]
#
# Prints the image reference on stdout (nothing else), progress on stderr; tags
# docker.io/library/trainop-tensorboard:<pyproject version> (the chart's default `tensorboard.image`),
# :dev and :src-<hash of the build inputs>; --save PATH writes a docker-archive with those three tags;
# the cache is ${TRAINOP_IMAGE_CACHE:-~/.cache/trainop-image}, shared with the project's image.
set -euo pipefail
exec bash "$(dirname "$0")/build-image.sh" --image tensorboard "$@"
