"""Who makes each request (before every page but the few anyone may fetch), and the sign-in form."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, redirect, render_template, request, session, url_for

from trainop.ui.auth import TOKEN_COOKIE, Refused, TooManyReviews, Unauthenticated, csrf_ok, secure_request
from trainop.ui.views.context import ui

auth = Blueprint("auth", __name__)
# Answered to anyone: the sign-in page itself, what it needs, and the server's health.
OPEN = ("static", "auth.signin", "healthz")


@auth.before_app_request
def who() -> Any:
    if request.endpoint in OPEN:
        return None
    app = ui()
    try:
        g.user = app.auth.user(request)
    except Unauthenticated as exc:
        return render_template("signin.html", message=str(exc), settings=app.settings), 401
    except Refused as exc:
        return render_template("error.html", code=403, message=str(exc)), 403
    except TooManyReviews as exc:
        page = render_template("signin.html", message=str(exc), settings=app.settings)
        return page, 429, {"Retry-After": str(exc.retry_after)}
    return None


@auth.route("/signin", methods=["GET", "POST"])
def signin() -> Any:
    settings = ui().settings
    if request.method == "GET":
        return render_template("signin.html", message="", settings=settings)
    # Without this check another site could sign a browser in as the attacker (login CSRF), and whatever
    # the victim then creates would be the attacker's to read.
    if not csrf_ok(request):
        message = "the sign-in form is stale or not from this page (CSRF check): sign in again"
        return render_template("signin.html", message=message, settings=settings), 403
    token = request.form.get("token", "").strip()
    session.pop("csrf", None)  # a new session gets a new CSRF token
    response = redirect(url_for("jobs.index"), 303)
    secure = secure_request(request, settings.auth.secure_cookies)
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", secure=secure)
    return response
