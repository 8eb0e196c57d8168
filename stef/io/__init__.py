"""Sources and sinks at the edges of the service: Kafka, JSONL files, stdin/stdout, dead letters."""
