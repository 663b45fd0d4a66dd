"""Admission webhooks (defaulting and validation) for the kubeflow.org/v1 job kinds."""
