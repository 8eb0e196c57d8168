# STEF image: `stef run` beside a Text-to-SQL agent (deploy/README.md).
#   docker build -t stef:0.1.0 .
#   docker run --rm -p 9464:9464 -v "$PWD/rules:/app/rules:ro" stef:0.1.0 \
#       run --source kafka://kafka:9092/agent-logs?group=stef --results kafka://kafka:9092/stef-results
# Rules (/app/rules, hot-reloaded) can be mounted over the copy baked in; the prompt templates ship
# inside the package. Dead letters go to the volume /var/lib/stef (STEF_STATE_DIR) unless
# --dead-letters says otherwise; /app stays read-only.
# No secrets here: the LLM key comes from the environment at run time (STEF_LLM_API_KEY).

# ---- build: install STEF and its dependencies into a virtualenv --------------------------------
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Every package from the hashed lock (requirements/README.md); STEF itself built without isolation
# by the locked setuptools, so a release made after the lock cannot change the image.
# sqlglot's compiled parser (requirements/fast.txt) where the platform has a wheel of it: the same
# results for about a quarter less CPU a record; else the pure-Python parser.
COPY requirements/build.txt requirements/run.txt requirements/fast.txt ./requirements/
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements/build.txt \
    && pip install --no-cache-dir --require-hashes --no-deps -r requirements/run.txt \
    && { pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: \
           -r requirements/fast.txt \
         || echo "sqlglotc did not install (no wheel here?): the pure-Python parser"; }
COPY pyproject.toml README.md LICENSE ./
COPY stef ./stef
RUN pip install --no-cache-dir --no-deps --no-build-isolation .

# ---- runtime: the virtualenv and rules; no compilers, no pip cache, not root ----------
FROM python:3.11-slim
LABEL org.opencontainers.image.title="stef" \
      org.opencontainers.image.description="Production judge for Text-to-SQL agents" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 stef \
    && useradd --system --uid 10001 --gid stef --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin stef \
    && mkdir -p /var/lib/stef \
    && chown 10001:10001 /var/lib/stef
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY rules /app/rules
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    STEF_RULES=/app/rules \
    STEF_METRICS_HOST=0.0.0.0 \
    STEF_METRICS_PORT=9464 \
    STEF_LOG_LEVEL=info \
    STEF_STATE_DIR=/var/lib/stef
# What STEF writes by default (dead letters) goes here, never to the read-only /app.
VOLUME ["/var/lib/stef"]
USER 10001:10001
EXPOSE 9464
# slim has no curl: probe /healthz with the standard library.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('STEF_METRICS_PORT', '9464') + '/healthz', timeout=3)"]
# Exec form: stef is PID 1 and receives SIGTERM itself (drain, flush, commit, exit 0).
ENTRYPOINT ["stef"]
CMD ["run", "--source", "-", "--results", "-", "--rules", "/app/rules"]
