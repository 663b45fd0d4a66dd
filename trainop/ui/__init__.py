"""`trainop ui`: the web UI over a cluster's training jobs or the runs of `trainop run` (docs/ui.md)."""
