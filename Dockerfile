# One image serves both the sync hooks and the admission webhooks; the Deployments pick the app.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY hooks hooks
COPY webhooks webhooks
COPY trainop trainop
RUN pip install --no-cache-dir . && useradd --uid 65532 --no-create-home trainop
USER 65532
EXPOSE 8080 9443
CMD ["gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:app"]
