#!/bin/sh
# Mosquitto with seed 002's settings (as servers/mosquitto, each overridable through the
# environment) on a unix socket, and MQTT over WebSocket on $PORT through ws_bridge.py
# (Debian's Mosquitto has no WebSocket listener of its own).
set -eu
: "${PORT:?PORT must be set}"
conf=/tmp/mosquitto.conf
sock=/tmp/mosquitto.sock
cat > "$conf" <<CONF
listener 0 $sock
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
if [ -n "${MOSQUITTO_EXTRA:-}" ]; then
    printf '%s\n' "$MOSQUITTO_EXTRA" >> "$conf"
fi
echo "mosquitto settings:"; grep -v '^log' "$conf"
mosquitto -c "$conf" &
while [ ! -S "$sock" ]; do sleep 0.1; done
MOSQUITTO_SOCKET=$sock exec python3 /usr/local/bin/ws_bridge.py
