"""The job's story as a picture: its conditions on a time axis, and a bar per pod from start to end."""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any

from trainop.api.times import is_timestamp, parse_timestamp
from trainop.jsontypes import Json

WIDTH, LANE, LEFT, RIGHT = 720, 22, 150, 20


def _t(value: Any) -> datetime | None:
    return parse_timestamp(value) if isinstance(value, str) and is_timestamp(value) else None


def _pod_span(pod: Json, now: datetime) -> tuple[datetime | None, datetime | None, str]:
    status = pod.get("status") or {}
    start = _t(status.get("startTime")) or _t((pod.get("metadata") or {}).get("creationTimestamp"))
    ends = [
        _t(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for s in status.get("containerStatuses") or []
        if isinstance(s, dict)
    ]
    phase = str(status.get("phase") or "Pending")
    done = phase in ("Succeeded", "Failed") and all(ends) and ends
    end = max(e for e in ends if e) if done else now
    return start, end, phase


def timeline(job: Json, pods: list[Json], now: datetime) -> str:
    """An SVG of the job's conditions and pods; empty when the job has no times to draw yet."""
    status = job.get("status") or {}
    conditions = [
        c for c in status.get("conditions") or [] if isinstance(c, dict) and _t(c.get("lastTransitionTime"))
    ]
    spans = [(str((p.get("metadata") or {}).get("name") or ""), *_pod_span(p, now)) for p in pods]
    times = [_t(c["lastTransitionTime"]) for c in conditions] + [s for _, s, _, _ in spans if s]
    start = _t((job.get("metadata") or {}).get("creationTimestamp")) or _t(status.get("startTime"))
    if start is None and not times:
        return ""
    t0 = min([t for t in [start, *times] if t])
    t1 = _t(status.get("completionTime")) or now
    t1 = max([t1, *[t for t in times if t], *[e for _, _, e, _ in spans if e]])
    span = max((t1 - t0).total_seconds(), 1.0)

    def x(t: datetime) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (t - t0).total_seconds() / span

    lanes = list(dict.fromkeys(str(c.get("type")) for c in conditions))
    height = LANE * (len(lanes) + len(spans)) + 34
    out = [
        f'<svg class="timeline" role="img" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'aria-label="conditions and pods over time, {escape(_label(t0))} to {escape(_label(t1))}">'
    ]
    true_times = sorted(
        (_t(c["lastTransitionTime"]), str(c.get("type"))) for c in conditions if c.get("status") == "True"
    )
    for i, lane in enumerate(lanes):
        y = 10 + i * LANE
        out.append(f'<text class="lane" x="4" y="{y + 12}">{escape(lane)}</text>')
        for c in (c for c in conditions if str(c.get("type")) == lane):
            at = _t(c["lastTransitionTime"])
            assert at is not None
            cls = (
                "bad"
                if lane == "Failed" and c.get("status") == "True"
                else "on"
                if c.get("status") == "True"
                else "off"
            )
            if c.get("status") == "True":
                later = [t for t, kind in true_times if t and t > at and kind != lane]
                end = min(later) if later else t1
                tip = f"{lane} since {_label(at)}: {c.get('reason') or ''}"
                out.append(_bar(cls, x(at), x(end), y, tip))
            tip = f"{lane}={c.get('status')} at {_label(at)}: {c.get('message') or ''}"
            dot = f'<circle class="{cls}" cx="{x(at):.1f}" cy="{y + 9}" r="5">'
            out.append(f"{dot}<title>{escape(tip)}</title></circle>")
    for j, (name, s, e, phase) in enumerate(spans):
        y = 10 + (len(lanes) + j) * LANE
        out.append(f'<text class="lane" x="4" y="{y + 12}">{escape(name[-22:])}</text>')
        if s and e:
            tip = f"{name}: {phase}, {_label(s)} to {_label(e)}"
            out.append(_bar(f"pod {phase.lower()}", x(s), x(e), y, tip))
    axis = height - 12
    out.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{axis - 8}" y2="{axis - 8}"/>')
    out.append(f'<text class="tick" x="{LEFT}" y="{axis + 6}">{escape(_label(t0))}</text>')
    out.append(
        f'<text class="tick" x="{WIDTH - RIGHT}" y="{axis + 6}" text-anchor="end">{escape(_label(t1))}</text>'
    )
    out.append("</svg>")
    return "".join(out)


def _bar(cls: str, start: float, end: float, y: int, tip: str) -> str:
    width = max(end - start, 2)
    return (
        f'<rect class="{escape(cls)}" x="{start:.1f}" y="{y + 3}" width="{width:.1f}" height="12" rx="3">'
        f"<title>{escape(tip)}</title></rect>"
    )


def _label(t: datetime) -> str:
    return t.strftime("%H:%M:%S")
