"""The creation wizard: a form checked by the admission code on every change, whose job can be
downloaded, dry-run or created."""

from __future__ import annotations

from typing import Any

import yaml
from flask import Blueprint, Response, redirect, render_template, request, url_for
from werkzeug.utils import secure_filename

from trainop.frameworks import KINDS, kind_info
from trainop.jsontypes import Json
from trainop.ui.source import Invalid, NotAllowed
from trainop.ui.views.context import ui, user, writes_allowed
from trainop.ui.wizard import (
    CLEAN_POLICIES,
    DEFAULT_KIND,
    FORM,
    RESOURCES,
    RUN_POLICY,
    Form,
    errors_by_field,
    examples_of,
    extension_choices,
    field_of,
    form_fields,
)

wizard = Blueprint("wizard", __name__)


@wizard.route("/new", methods=["GET", "POST"])
def form() -> Any:
    posted = request.method == "POST"
    do = request.form.get("do")
    form = (
        Form(dict(request.form.items()))
        if posted
        else Form.initial(request.args.get("kind", DEFAULT_KIND), request.args.get("example", ""))
    )
    job, problems = form.job()
    # What goes with the job (an example's ConfigMap), made here from the example's name, never taken
    # from the request.
    companions = form.companions(job)
    errors = errors_by_field(job, problems)
    outcome = ""
    if posted and do == "download":
        return _download(job, companions)
    if posted and do in ("create", "dry-run") and not errors:
        writes_allowed()
        try:
            outcome = ui().source.create(user(), job, dry_run=do == "dry-run", companions=companions)
        except Invalid as exc:
            for path, message in exc.errors:
                errors.setdefault(field_of(path) if path else FORM, []).append(message)
        except NotAllowed as exc:
            errors.setdefault(FORM, []).append(str(exc))
        else:
            if do == "create":
                return _created(job, outcome)
    context = _context(form, job, companions, errors, outcome)
    if request.headers.get("HX-Request") and do in (None, "", "check"):
        return render_template("wizard_check.html", fields=[FORM, *form_fields(form.kind)], **context)
    return render_template("wizard.html", **context)


def _download(job: Json, companions: list[Json]) -> Response:
    name = str(job["metadata"].get("name") or "job")
    headers = {"Content-Disposition": f'attachment; filename="{secure_filename(name) or "job"}.yaml"'}
    text = yaml.safe_dump_all([*companions, job], sort_keys=False)
    return Response(text, 200, headers, mimetype="application/yaml")


def _created(job: Json, outcome: str) -> Any:
    meta = job["metadata"]
    created = (
        outcome if ui().source.creates == "started" else f"{meta['namespace']}/{job['kind']}/{meta['name']}"
    )
    target = url_for("job.page", key=created)
    if request.headers.get("HX-Request"):
        return Response("", 200, {"HX-Redirect": target})
    return redirect(target, 303)


def _context(
    form: Form, job: Json, companions: list[Json], errors: dict[str, list[str]], outcome: str
) -> Json:
    app = ui()
    meta = job["metadata"]
    return {
        "form": form,
        "info": kind_info(form.kind),
        "kinds": sorted(KINDS),
        "examples": examples_of(form.kind),
        "example": form.example,
        "companions_yaml": yaml.safe_dump_all(companions, sort_keys=False) if companions else "",
        "errors": errors,
        "yaml_text": yaml.safe_dump(job, sort_keys=False),
        "resources": RESOURCES,
        "extension_fields": extension_choices(),
        "run_policy": RUN_POLICY,
        "clean_policies": CLEAN_POLICIES,
        "outcome": outcome,
        "FORM": FORM,
        "create_label": "Start it here" if app.source.creates == "started" else "Create",
        # Offered only to a user who may create this kind in the form's namespace.
        "may_create": app.settings.writable
        and app.source.may(user(), f"{meta['namespace']}/{job['kind']}/{meta['name']}", "create"),
    }
