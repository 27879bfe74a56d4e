# The service as a container: slim base, non-root user, read-only friendly, health check.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
COPY schemas ./schemas
RUN python -m venv /opt/sdc && /opt/sdc/bin/pip install --no-cache-dir .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --no-create-home sdc
COPY --from=build /opt/sdc /opt/sdc
ENV PATH=/opt/sdc/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SDC_HOST=0.0.0.0 \
    SDC_PORT=8787
USER 10001
EXPOSE 8787
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SDC_PORT', '8787'), timeout=2)"]
CMD ["sdc-service"]
