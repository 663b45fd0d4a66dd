"""An extension's faces: what it shows outside admission and the sync, declared with the extension.

Admission and the sync call an extension's hooks (trainop.extensions.base.Extension). The engines around
them also meet it, and each reads it through the registry instead of naming it:

* `trainop run` (trainop.local.cli): the options it adds (`RunOption`), how they change the submitted job
  (`submitted`), what a local run says about its annotations (`local_notices`), and what it runs on this
  machine beside the job (`local_setup`: the job as it runs here and its `LocalServer`s);
* the UI (trainop.ui): the links it puts first on a job's row and page (`JobLink`, `linked`), the
  annotations a list row keeps for them (`summary_annotations`), and the creation wizard's fields per
  replica type (`WizardField`, `form_values`, `form_annotations`, `form_field`);
* the chart: which value of charts/trainop/values.yaml reaches which of its servers as which environment
  variable (`ChartValue`), checked against the templates by tests/install/test_extension_chart_values.py.

Every face defaults to "none", so an extension declares only the ones it has.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from trainop.jsontypes import Json

# The chart's servers that read the extensions' settings: the sync hooks and the admission webhooks.
HOOKS: Final = "hooks"
WEBHOOKS: Final = "webhooks"
SERVERS: Final = (HOOKS, WEBHOOKS)


# ---------------------------------------------------------------------------------------------- trainop run
@dataclass(frozen=True)
class RunOption:
    """One command-line option an extension adds to `trainop run`."""

    flag: str  # "--log-format"
    help: str
    choices: tuple[str, ...] = ()  # a value, one of these; without choices the option is a switch

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.choices:
            parser.add_argument(self.flag, choices=self.choices, help=self.help)
        else:
            parser.add_argument(self.flag, action="store_true", help=self.help)


class LocalRefusal(Exception):
    """An extension cannot give this job the local run its options ask for; the message says why and
    what to do. `trainop run` prints it and exits before anything starts."""


@dataclass(frozen=True)
class LocalServer:
    """A program `trainop run` serves on a free 127.0.0.1 port beside the job, over one directory.

    The run starts it once the job is admitted, prints `<name>: <url> (over <directory>)`, records
    `{"url": ...}` under `record_key` in its run.json (which the UI links to, `JobLink.key`), and, when
    `outlives_job`, keeps serving after the job ends until Ctrl-C."""

    name: str  # as the run prints it: "TensorBoard"
    record_key: str  # its key in run.json
    # The program; "{port}" in an argument is the port it is given.
    argv: tuple[str, ...]
    # A path under its URL that answers once it serves.
    ready_path: str
    directory: str  # what it serves; a directory of this machine is created first
    env: Mapping[str, str] = field(default_factory=dict)  # beside this machine's environment
    log_file: str = ""  # its output, in the run's folder ("" for <record_key>.log)
    outlives_job: bool = True
    # Seconds it may take to answer at start.
    ready_timeout: float = 120.0


@dataclass(frozen=True)
class LocalSetup:
    """The admitted job as it runs here, and what runs beside it."""

    job: Json
    servers: tuple[LocalServer, ...] = ()


# ---------------------------------------------------------------------------------------------- the UI
@dataclass(frozen=True)
class JobLink:
    """A link an extension puts first among a job's links, on its list row and its page."""

    name: str  # the link's text: "TensorBoard"
    # Where a local run records the address of what it links to (`LocalServer.record_key`).
    key: str
    # The field of the UI's settings (trainop.ui.settings.UiSettings) holding its URL template over the job's
    # fields, for a cluster, where the job's annotations alone make the sync serve it; "" there: no link.
    setting: str


@dataclass(frozen=True)
class WizardField:
    """One field an extension adds to the creation wizard for every replica type: `<type>.<name>`."""

    name: str  # "accelerator"
    label: str  # "Accelerator profile"
    hint: str = ""  # the empty field's placeholder
    # A field with choices is a picker: (value, text) pairs, computed when the form is shown.
    choices: Callable[[], list[tuple[str, str]]] | None = None
    empty_choice: str = "none"  # the picker's text for no value


# ---------------------------------------------------------------------------------------------- the chart
@dataclass(frozen=True)
class ChartValue:
    """A value of charts/trainop/values.yaml an extension's servers read, and how it reaches them."""

    value: str  # its dotted path: "logging.trainingProcesses.format"
    env: str  # the environment variable the extension reads: "TRAINOP_DEFAULT_LOG_FORMAT"
    servers: tuple[str, ...] = SERVERS
    # "": the variable holds the value (or a form of it); else the value is rendered into a ConfigMap
    # mounted into the servers, and the variable names this file of it.
    file: str = ""


class Faces:
    """The faces of an Extension; every default is "none". See the module's docstring."""

    # ---- trainop run ------------------------------------------------------------------------------
    def run_options(self) -> tuple[RunOption, ...]:
        """The options this extension adds to `trainop run`."""
        return ()

    def submitted(self, job: Json, options: Mapping[str, Any]) -> Json:
        """The job `trainop run` submits, from the file's `job` and the values of this extension's
        `run_options` (keyed by flag; None when not given). Before admission, as if the file said it."""
        return job

    def local_notices(self, values: Mapping[str, str]) -> tuple[str, ...]:
        """What `trainop run` prints, once, about this extension's annotations on the admitted job
        (`values`) before running it: where a local run does otherwise than a cluster."""
        return ()

    def local_setup(self, job: Json, options: Mapping[str, Any], workdir: Path) -> LocalSetup:
        """The admitted `job` as it runs on this machine and the servers to start beside it, given this
        extension's `run_options` and the run's folder. Raises LocalRefusal."""
        return LocalSetup(job)

    # ---- the UI -----------------------------------------------------------------------------------
    links: tuple[JobLink, ...] = ()
    # The annotations of this extension a list row keeps (Summary.annotations), so that the row shows
    # the same links as the job's page.
    summary_annotations: tuple[str, ...] = ()

    def linked(self, link: JobLink, values: Mapping[str, str]) -> bool:
        """Whether a job with these annotations (this extension's) has what `link` points to on a
        cluster."""
        return False

    def wizard_fields(self) -> tuple[WizardField, ...]:
        return ()

    def form_values(self, annotations: Mapping[str, Any], replica_types: Sequence[str]) -> dict[str, str]:
        """The wizard's fields (`<type>.<name>`) filled from a job's annotations (all of them)."""
        return {}

    def form_annotations(
        self,
        annotations: Mapping[str, Any],
        form: Mapping[str, str],
        replica_types: Sequence[str],
        present: Sequence[str],
    ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The job's `annotations` with the wizard's fields written over this extension's, and the
        messages (by form field) about fields that cannot be written. `replica_types` are the kind's,
        `present` the ones the form gives replicas."""
        return dict(annotations), {}

    def form_field(self, path: str) -> str | None:
        """The wizard's field a message about `path` belongs at, when it is one of this extension's."""
        return None

    # ---- the chart --------------------------------------------------------------------------------
    chart_values: tuple[ChartValue, ...] = ()
