"""Strings that users, kubectl and the Kubeflow SDK see; they must match Kubeflow v1 exactly."""

from typing import Final

GROUP: Final = "kubeflow.org"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

LABEL_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME: Final = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE: Final = "training.kubeflow.org/job-role"
JOB_ROLE_MASTER: Final = "master"

MANAGED_BY_US: Final = "kubeflow.org/training-operator"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES: Final = (MANAGED_BY_US, MANAGED_BY_MULTIKUEUE)

RESTART_POLICIES: Final = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES: Final = ("All", "Running", "None")

# Condition types, in the order Kubeflow defines them.
CREATED: Final = "Created"
RUNNING: Final = "Running"
RESTARTING: Final = "Restarting"
SUCCEEDED: Final = "Succeeded"
SUSPENDED: Final = "Suspended"
FAILED: Final = "Failed"
