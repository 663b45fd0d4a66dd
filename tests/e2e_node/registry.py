"""A pull-only OCI registry on loopback, serving one OCI image layout directory to containerd.

Why a registry at all: the examples' images are tagged ``:latest`` and their YAMLs set no
``imagePullPolicy``, so the kubelet pulls them on every pod start (Kubernetes' default for ``latest``).
Applying them unchanged, as a user would, needs a registry; none is reachable from here, so containerd's
``docker.io`` host is pointed at this server (``hosts.toml`` with ``server =`` this URL, so nothing falls
back to the internet). Once containerd holds an image's blobs a pull only resolves the manifest.

It serves what the distribution spec needs for a pull and nothing else:
``GET /v2/``, ``GET|HEAD /v2/<repo>/manifests/<tag|digest>``, ``GET|HEAD /v2/<repo>/blobs/<digest>``.
Tags are the layout's ``org.opencontainers.image.ref.name`` annotations (``repo:tag``); ``index.json`` is
re-read per request, so images added while it runs are served at once. Every request is logged.

    python registry.py --layout ~/.cache/trainop-e2e/images/oci --port 5000
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REF_ANNOTATION = "org.opencontainers.image.ref.name"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
ROUTE = re.compile(r"^/v2/(?P<repo>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


class Layout:
    def __init__(self, root: Path) -> None:
        self.root = root

    def blob(self, digest: str) -> Path | None:
        if not DIGEST.match(digest):
            return None
        path = self.root / "blobs" / "sha256" / digest[7:]
        return path if path.is_file() else None

    def tagged(self, repo: str, tag: str) -> tuple[str, str] | None:
        """(digest, media type) of ``repo:tag``, the last entry winning like a re-push."""
        try:
            index = json.loads((self.root / "index.json").read_text())
        except (OSError, ValueError):
            return None
        found = None
        for m in index.get("manifests", []):
            if (m.get("annotations") or {}).get(REF_ANNOTATION) == f"{repo}:{tag}":
                found = (str(m["digest"]), str(m.get("mediaType") or MANIFEST_TYPES[0]))
        return found


def make_handler(layout: Layout) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve(body=True)

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def _fail(self, status: int, code: str, message: str) -> None:
            data = json.dumps({"errors": [{"code": code, "message": message}]}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _serve(self, body: bool) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/v2", "/v2/"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                self.end_headers()
                if body:
                    self.wfile.write(b"{}")
                return
            m = ROUTE.match(path)
            if not m:
                self._fail(404, "NOT_FOUND", f"no route {path}")
                return
            repo, kind, ref = m["repo"], m["kind"], m["ref"]
            media_type = "application/octet-stream"
            if kind == "manifests" and not DIGEST.match(ref):
                tagged = layout.tagged(repo, ref)
                if tagged is None:
                    self._fail(404, "MANIFEST_UNKNOWN", f"{repo}:{ref} is not in {layout.root}")
                    return
                ref, media_type = tagged
            blob = layout.blob(ref)
            if blob is None:
                code = "MANIFEST_UNKNOWN" if kind == "manifests" else "BLOB_UNKNOWN"
                self._fail(404, code, f"{ref} is not in {layout.root}")
                return
            if kind == "manifests" and media_type == "application/octet-stream":
                media_type = str(json.loads(blob.read_bytes()).get("mediaType") or MANIFEST_TYPES[0])
            self.send_response(200)
            self.send_header("Content-Type", media_type)
            self.send_header("Content-Length", str(blob.stat().st_size))
            self.send_header("Docker-Content-Digest", ref)
            self.end_headers()
            if body:
                with blob.open("rb") as fh:
                    self.wfile.flush()
                    self.connection.sendfile(fh)

    return Handler


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--layout", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    if not (args.layout / "index.json").is_file():
        parser.error(f"{args.layout} is not an OCI image layout (no index.json); run hack/build-node.sh")
    server = ThreadingHTTPServer((args.host, args.port), make_handler(Layout(args.layout)))
    server.daemon_threads = True
    print(f"serving {args.layout} on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
