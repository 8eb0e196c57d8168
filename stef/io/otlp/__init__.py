"""OpenTelemetry at the edges: OTLP traces and logs in (decoded, grouped by trace, mapped to
records by span selectors), ``gen_ai.evaluation.result`` log records out (docs/opentelemetry.md).

Needs the ``otel`` extra (``opentelemetry-proto``); Parquet exports also the ``duckdb`` extra.
"""
