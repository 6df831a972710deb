"""Per-job GPU and network telemetry: sources, downsampled storage, summaries, efficiency flags, charts and API.

See docs/architecture.md, "Telemetry". Scheduler metrics and /metrics live elsewhere (not built yet).
"""
