"""pytest-webperf: performance regression gates for web servers and MQTT brokers."""

__version__ = "0.1.0"
