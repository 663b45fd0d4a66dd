"""`trainop examples`: list the packaged examples, or print one (`| kubectl apply -f -`)."""

from __future__ import annotations

import argparse
import sys

from trainop.examples import UnknownExampleError, example, examples

EXIT_UNKNOWN = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Run one here with `trainop run example:NAME`, or on a cluster with "
        "`trainop examples show NAME | kubectl apply -f -`."
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.add_parser("list", help="name, kind and description of every example (the default)")
    show = sub.add_parser("show", help="print an example's YAML: the ConfigMap with its script, then the job")
    show.add_argument("name", metavar="NAME", help="an example's name, as `trainop examples` lists it")


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        try:
            sys.stdout.write(example(args.name).document)
        except UnknownExampleError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
        return 0
    rows = [("NAME", "KIND", "DESCRIPTION"), *((e.name, e.kind, e.description) for e in examples())]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for name, kind, description in rows:
        print(f"{name:<{widths[0]}}  {kind:<{widths[1]}}  {description}")
    return 0
