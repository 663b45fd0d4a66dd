# One image serves both the sync hooks and the admission webhooks; the Deployments pick the app.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
COPY hooks hooks
COPY webhooks webhooks
COPY trainop trainop
# The dependencies exactly as requirements.lock pins them (versions and wheel hashes, written by
# hack/lock-image-requirements.py), then the project itself with nothing resolved: no package file
# enters the image that the lock does not name, the build backend (setuptools) included.
RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r requirements.lock \
  && pip install --no-cache-dir --no-deps --no-build-isolation . \
  && useradd --uid 65532 --no-create-home trainop
USER 65532
EXPOSE 8080 9443
CMD ["gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:app"]
