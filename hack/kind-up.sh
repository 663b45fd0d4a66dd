#!/usr/bin/env bash
# The production path on a local kind cluster, for machines with Docker (needs docker, kind, kubectl, helm):
#   bash hack/kind-up.sh
# 1. builds the operator's image (the Dockerfile) and the generic PyTorch image (training-images/) with docker;
# 2. creates the kind cluster $KIND_CLUSTER (default "trainop") unless it exists, and loads both images;
# 3. installs (or upgrades) the chart with its Metacontroller dependency into $TRAINOP_NAMESPACE;
# 4. applies `trainop examples show pytorch` (its script's ConfigMap, then the job) and waits until the job
#    Succeeded (or fails, with its pods).
# Remove it all with `kind delete cluster --name trainop`.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${KIND_CLUSTER:-trainop}"
NAMESPACE="${TRAINOP_NAMESPACE:-trainop-system}"
CONTEXT="kind-$CLUSTER"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)"
IMAGE="trainop:$VERSION"
# Not :latest: the kubelet always pulls :latest images, and this one exists only inside the cluster.
EXAMPLE_IMAGE="trainop-examples/pytorch:kind"
JOB="pytorch-dist-digits"

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "hack/kind-up.sh needs $tool on PATH" >&2; exit 1; }
done

docker build -t "$IMAGE" .
docker build --build-arg FRAMEWORK=pytorch -t "$EXAMPLE_IMAGE" training-images/

# No `kind get clusters | grep -q`: grep stops reading early and pipefail would fail on kind's SIGPIPE.
clusters="$(kind get clusters 2>/dev/null)"
if ! grep -qx "$CLUSTER" <<<"$clusters"; then
  kind create cluster --name "$CLUSTER" --wait 180s
fi
kind load docker-image "$IMAGE" "$EXAMPLE_IMAGE" --name "$CLUSTER"

helm dependency build charts/trainop
helm upgrade --install trainop charts/trainop --kube-context "$CONTEXT" \
  --namespace "$NAMESPACE" --create-namespace --set image.tag="$VERSION" --wait --timeout 5m

kubectl --context "$CONTEXT" delete pytorchjob "$JOB" --ignore-not-found --wait
"${PYTHON:-python3}" -m trainop.cli examples show pytorch \
  | sed "s#image: trainop-examples/pytorch:latest#image: $EXAMPLE_IMAGE#" \
  | kubectl --context "$CONTEXT" apply -f -

# The newest condition is the job's state (Created, Running, Restarting, Succeeded, Failed).
for _ in $(seq 1 180); do
  state="$(kubectl --context "$CONTEXT" get pytorchjob "$JOB" -o jsonpath='{.status.conditions[-1:].type}')"
  case "$state" in
    Succeeded)
      kubectl --context "$CONTEXT" logs "$JOB-master-0" --tail 5
      echo "PyTorchJob $JOB Succeeded on kind cluster $CLUSTER"
      exit 0 ;;
    Failed)
      kubectl --context "$CONTEXT" get pytorchjob "$JOB" -o yaml
      kubectl --context "$CONTEXT" get pods -l "training.kubeflow.org/job-name=$JOB"
      exit 1 ;;
  esac
  sleep 5
done
echo "PyTorchJob $JOB not finished after 15 minutes (state: ${state:-none})" >&2
kubectl --context "$CONTEXT" get pods -l "training.kubeflow.org/job-name=$JOB" >&2
exit 1
