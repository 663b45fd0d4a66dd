"""The kubeflow.org/v1 job API: kinds, models, defaulting, validation and CRD generation."""
