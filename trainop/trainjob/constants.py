"""Names from Kubeflow Trainer v2's API and its JobSets that the engine and its tests share."""

from __future__ import annotations

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"

# The step a replicatedJob plays, on its Job template's labels.
LABEL_ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
# The trainer step's replicatedJob and container are both named `node`.
NODE = "node"
ENV_STORAGE_URI = "STORAGE_URI"
