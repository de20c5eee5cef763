#!/bin/sh
# Mosquitto 2 over TLS with seed 002's settings (as servers/mosquitto, each overridable
# through the environment). The certificate is made here, at every start (self-signed,
# EC P-256, for 127.0.0.1, $BIND and localhost): never in the image or in git.
set -eu
: "${PORT:?PORT must be set}"
: "${BIND:=127.0.0.1}"
tls=/tmp/tls
mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=$BIND" -addext "subjectAltName=IP:$BIND,IP:127.0.0.1,DNS:localhost" \
    -keyout "$tls/server.key" -out "$tls/server.pem" 2>/dev/null
conf=/tmp/mosquitto.conf
cat > "$conf" <<CONF
listener ${PORT} 127.0.0.1
certfile $tls/server.pem
keyfile $tls/server.key
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
    printf 'listener %s %s\ncertfile %s\nkeyfile %s\n' "$PORT" "$BIND" "$tls/server.pem" \
        "$tls/server.key" >> "$conf"
fi
if [ -n "${MOSQUITTO_EXTRA:-}" ]; then
    # Any other setting, one per line (e.g. "max_queued_bytes 0").
    printf '%s\n' "$MOSQUITTO_EXTRA" >> "$conf"
fi
echo "mosquitto settings:"; grep -v '^log' "$conf"
exec mosquitto -c "$conf"
