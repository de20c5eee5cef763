#!/bin/sh
# Mosquitto 2 with seed 002's settings; each one overridable through the environment so a
# test can compare, e.g. MOSQUITTO_MAX_INFLIGHT_MESSAGES=20 (Mosquitto's own default).
set -eu
: "${PORT:?PORT must be set}"
conf=/tmp/mosquitto.conf
cat > "$conf" <<CONF
listener ${PORT} 127.0.0.1
allow_anonymous true
persistence false
log_dest stderr
log_type error
log_type warning
log_type notice
connection_messages false
max_connections ${MOSQUITTO_MAX_CONNECTIONS:--1}
max_queued_messages ${MOSQUITTO_MAX_QUEUED_MESSAGES:-0}
max_inflight_messages ${MOSQUITTO_MAX_INFLIGHT_MESSAGES:-0}
CONF
if [ -n "${BIND:-}" ] && [ "$BIND" != 127.0.0.1 ]; then
    # --webperf-target-bind: the workers publish there; the servers of a composite
    # (go-mqtt, ...) keep subscribing on loopback.
    printf 'listener %s %s\n' "$PORT" "$BIND" >> "$conf"
fi
if [ -n "${MOSQUITTO_EXTRA:-}" ]; then
    # Any other setting, one per line (e.g. "max_queued_bytes 0").
    printf '%s\n' "$MOSQUITTO_EXTRA" >> "$conf"
fi
echo "mosquitto settings:"; grep -v '^log' "$conf"
exec mosquitto -c "$conf"
