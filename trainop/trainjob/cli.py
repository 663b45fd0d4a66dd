"""`trainop migrate FILE`: the v1 jobs of a manifest as TrainJobs and their TrainingRuntimes.

The manifest goes to stdout with each job replaced by its runtime and TrainJob and every other document
(the ConfigMaps a job mounts, say) as it was, ready for `kubectl apply -f -`; what changed and what a
TrainJob cannot carry goes to stderr, per job. A job that cannot migrate fails the command and nothing is
printed to stdout.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from trainop.frameworks import KINDS
from trainop.trainjob.migrate import Migration, MigrationError, migrate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="a manifest holding kubeflow.org/v1 jobs, or `-` for stdin (`trainop examples show pytorch | "
        "trainop migrate -`)",
    )


def read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    with open(source, encoding="utf-8") as fh:
        return fh.read()


def migrated(text: str) -> tuple[list[Any], list[tuple[str, Migration]]]:
    """The manifest's documents with every v1 job replaced, and each job's migration by its name."""
    out: list[Any] = []
    done: list[tuple[str, Migration]] = []
    for i, doc in enumerate(yaml.safe_load_all(text)):
        if doc is None:
            continue
        if not (
            isinstance(doc, dict)
            and doc.get("kind") in KINDS
            and str(doc.get("apiVersion")) == "kubeflow.org/v1"
        ):
            out.append(doc)
            continue
        name = f"{doc['kind']} {(doc.get('metadata') or {}).get('name')}"
        try:
            migration = migrate(doc)
        except MigrationError as e:
            raise MigrationError(f"document {i + 1} ({name}): {e}") from None
        out += migration.objects
        done.append((name, migration))
    return out, done


def run(args: argparse.Namespace) -> int:
    try:
        docs, done = migrated(read(args.file))
    except (OSError, yaml.YAMLError, MigrationError) as e:
        print(f"trainop migrate: {e}", file=sys.stderr)
        return 1
    if not done:
        print(f"trainop migrate: {args.file} holds no kubeflow.org/v1 job", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
    for name, migration in done:
        print(
            f"{name} -> TrainJob and TrainingRuntime {migration.train_job['metadata']['name']}",
            file=sys.stderr,
        )
        for line in migration.changed:
            print(f"  changed: {line}", file=sys.stderr)
        for line in migration.not_carried:
            print(f"  not carried: {line}", file=sys.stderr)
    return 0
