"""A real Prometheus server for the tests, loaded with recorded DCGM exporter and node exporter series."""
