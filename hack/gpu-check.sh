#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: run the packaged example pytorch-nvidia-gpu-operator with `trainop run`
# (1 Master + up to 2 Workers, one GPU each) and check that every rank trained over NCCL on a GPU of its
# own and that the job reached its stated accuracy. CI does not run it (its machines have no GPU).
#
#   hack/gpu-check.sh                    # needs torch with CUDA and scikit-learn (hack/install-examples.sh pytorch)
#   hack/gpu-check.sh --host-network     # extra arguments go to `trainop run`
#
# Exit status: 0 proven; 1 the check failed (the message says what); 2 this machine has no NVIDIA GPU
# (nvidia-smi is missing or lists none), so there is nothing to check.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
NVIDIA_SMI=${NVIDIA_SMI:-nvidia-smi}
EXAMPLE=pytorch-nvidia-gpu-operator

fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }

if ! command -v "$NVIDIA_SMI" >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU to check: $NVIDIA_SMI is not installed (nothing was run)" >&2
  exit 2
fi
if ! listing=$("$NVIDIA_SMI" -L 2>&1); then
  echo "gpu-check: no NVIDIA GPU to check: \`$NVIDIA_SMI -L\` failed: $listing" >&2
  exit 2
fi
gpus=$(grep -c '^GPU ' <<<"$listing" || true)
if [ "$gpus" -eq 0 ]; then
  echo "gpu-check: no NVIDIA GPU to check: \`$NVIDIA_SMI -L\` lists none (nothing was run)" >&2
  exit 2
fi
echo "gpu-check: $gpus GPU(s):"
sed 's/^/  /' <<<"$listing"

"$PYTHON" - <<'EOF' || fail "torch cannot use the GPUs nvidia-smi lists (install a CUDA build of torch: hack/install-examples.sh pytorch)"
import sys
import torch
import torch.distributed as dist
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__}: torch.cuda.is_available() is False")
if not dist.is_nccl_available():
    sys.exit(f"torch {torch.__version__} was built without NCCL")
print(f"gpu-check: torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
EOF

# One GPU per pod and no sharing (NCCL refuses two ranks on one GPU): as many Workers as GPUs allow, at most
# the example's 2. rank 0 writes its result where we can read it.
workers=$(( gpus - 1 < 2 ? gpus - 1 : 2 ))
world=$(( workers + 1 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m trainop.cli examples show "$EXAMPLE" | "$PYTHON" -c '
import sys, yaml
workers, result = int(sys.argv[1]), sys.argv[2]
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
specs = docs[-1]["spec"]["pytorchReplicaSpecs"]
if workers:
    specs["Worker"]["replicas"] = workers
else:
    del specs["Worker"]
    del docs[-1]["metadata"]["annotations"]["trainop.dev/accelerator.Worker"]
for spec in specs.values():
    for c in spec["template"]["spec"]["containers"]:
        c["env"].append({"name": "RESULT_PATH", "value": result})
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
' "$workers" "$work/result.json" >"$work/job.yaml"

echo "gpu-check: trainop run example:$EXAMPLE with 1 Master + $workers Worker(s), one GPU each"
status=0
"$PYTHON" -m trainop.cli run "$work/job.yaml" --workdir "$work/run" --timeout 600 "$@" | tee "$work/out" || status=$?
[ "$status" -eq 0 ] || fail "trainop run exited $status (its output is above)"
grep -q "job Succeeded" "$work/out" || fail "the job did not succeed"

visible=()
for rank in $(seq 0 $(( world - 1 ))); do
  line=$(grep -o "rank $rank/$world: backend nccl on cuda:0 (.*), CUDA_VISIBLE_DEVICES=[0-9,]*" "$work/out" || true)
  [ -n "$line" ] || fail "rank $rank did not say it used NCCL on a GPU"
  visible+=("${line##*=}")
done
distinct=$(printf '%s\n' "${visible[@]}" | sort -u | wc -l)
[ "$distinct" -eq "$world" ] || fail "ranks shared GPUs: CUDA_VISIBLE_DEVICES per rank: ${visible[*]}"

"$PYTHON" - "$work/result.json" "$world" <<'EOF' || fail "the result does not hold"
import json, sys
result, world = json.load(open(sys.argv[1])), int(sys.argv[2])
assert result["world_size"] == world, result
assert [r["rank"] for r in result["ranks"]] == list(range(world)), result
assert result["accuracy"] >= result["target"], result
print(f"gpu-check: test accuracy {result['accuracy']:.4f} (target {result['target']:.2f})")
EOF

echo "gpu-check: PROVEN: $world ranks, each a local pod given its own GPU (CUDA_VISIBLE_DEVICES ${visible[*]})"
echo "gpu-check: by trainop run, trained one DDP model over NCCL on those GPUs and reached the example's target."
if [ "$world" -eq 1 ]; then
  echo "gpu-check: with one GPU there was no second rank: NCCL ran, but no gradient crossed between GPUs."
fi
