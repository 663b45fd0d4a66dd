"""`trainop`: one entry point; each subcommand lives with the code it drives."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from trainop import __version__

# name -> (module, help); modules define `add_arguments(parser)` and `run(args) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("trainop.ui.run", "run a job on this machine, each pod as a local process"),
    "examples": ("trainop.examples.cli", "list the examples shipped with trainop, or print one's YAML"),
    "ui": ("trainop.ui.cli", "serve the web UI over local runs (RUNS_DIR) or a cluster (--cluster)"),
    "crds": ("trainop.install.crds", "print or regenerate the CustomResourceDefinitions"),
    "migrate": ("trainop.trainjob.cli", "print a manifest's v1 jobs as Trainer v2 TrainJobs and runtimes"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trainop", description="Kubeflow v1 training jobs, on a cluster or here."
    )
    parser.add_argument("--version", action="version", version=f"trainop {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runners: dict[str, Callable[[argparse.Namespace], int]] = {}
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
        runners[name] = module.run
    args = parser.parse_args(argv)
    return runners[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
