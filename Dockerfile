# provisioner in a container: the nightly `sync` by default (what `manifests cronjob --image`
# runs: the CronJob gives `sync FLEET` as args), and `catalog serve` with other args (what
# `manifests catalog-service` runs). Small: a slim Python, the wheel and its runtime dependencies
# only (no sandbox, no test tools), built in a throw-away stage. Non-root: UID 65532, as the
# manifests' securityContext expects; nothing is written outside /tmp.
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY provisioner provisioner
COPY templates templates
RUN python -m venv /opt/provisioner \
 && /opt/provisioner/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/provisioner/bin/pip install --no-cache-dir . \
 && find /opt/provisioner -name '__pycache__' -prune -exec rm -rf {} +

FROM python:3.12-slim
COPY --from=build /opt/provisioner /opt/provisioner
ENV PATH=/opt/provisioner/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080
ENTRYPOINT ["provisioner"]
CMD ["sync", "/etc/provisioner/fleet.yaml"]
