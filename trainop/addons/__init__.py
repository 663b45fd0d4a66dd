"""Features beyond Kubeflow's, each switched on by a `trainop.dev/` annotation on the job (README table)."""
