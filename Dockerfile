# syntax=docker/dockerfile:1
# convograph: multi-stage build, dependencies in their own layer, non-root, data on a volume.
# Checked by tests/test_container.py (hadolint and the rules that matter); see README
# "Operating convograph" for what was and was not verified without Docker.

# A pinned patch release on a pinned Debian; bump both stages together.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# Dependencies first: this layer is rebuilt only when pyproject.toml changes.
COPY pyproject.toml README.md ./
RUN mkdir graph && touch graph/__init__.py \
    && pip install . \
    && pip uninstall -y convograph
COPY graph ./graph
RUN pip install --no-deps .

FROM ${PYTHON_IMAGE}
# A fixed numeric uid/gid: Kubernetes' runAsNonRoot can check it, and volume ownership is stable.
RUN groupadd --system --gid 10001 convograph \
    && useradd --system --uid 10001 --gid convograph --home-dir /srv/convograph convograph \
    && mkdir -p /srv/convograph/data \
    && chown -R convograph:convograph /srv/convograph
COPY --from=build /opt/venv /opt/venv
WORKDIR /srv/convograph
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CONVOGRAPH_HOST=0.0.0.0 \
    CONVOGRAPH_PORT=8000 \
    CONVOGRAPH_DATABASE_URL=sqlite+aiosqlite:////srv/convograph/data/convograph.db
USER 10001:10001
VOLUME ["/srv/convograph/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"]
# `serve` applies migrations on start (unless --no-migrate).
ENTRYPOINT ["convograph"]
CMD ["serve"]
