"""`trainop run`: a job's pods as local processes, driven by the same sync hook as on a cluster."""
