# The lab server (mcp-lab-server) in a container, as seed 000 starts it: `docker compose up
# --build` at the repository's root (compose.yaml includes deploy/compose/lab.yaml), then
# http://127.0.0.1:8089/mcp. docs/labserver.md "In a container".
# Checked by tests/deploy/test_lab_container.py (no container engine runs in CI).

# Build the wheel in a throw-away stage: the image gets the installed package, not the source.
FROM python:3.12-slim AS build
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MCP_TEST_PORT=8089
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin lab
USER 10001
WORKDIR /tmp
EXPOSE 8089
# /healthz answers 200 once the lab serves; MCP_TEST_PORT moves it with the server.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('MCP_TEST_PORT', '8089'), timeout=2)"]
# All interfaces inside the container: the port is published on the host's loopback only
# (deploy/compose/lab.yaml).
ENTRYPOINT ["mcp-lab-server", "--host", "0.0.0.0"]
