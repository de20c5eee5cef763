#!/bin/sh
# The plugin hands out our port in $PORT, the management port in $ADMIN_PORT and
# apache-php's port in $BACKEND_PORT (host networking, loopback only).
set -eu
: "${PORT:?PORT must be set}"
: "${ADMIN_PORT:?ADMIN_PORT must be set}"
: "${BACKEND_PORT:?BACKEND_PORT must be set (the apache-php backend)}"
: "${VARNISH_STORAGE:=malloc,256m}"
: "${BIND:=127.0.0.1}"  # --webperf-target-bind: where remote workers reach us (management stays on loopback)
sed -e "s/@BACKEND_PORT@/$BACKEND_PORT/g" /etc/varnish/default.vcl.template \
    > /etc/varnish/default.vcl
# Debian's service defaults (varnish.service): -a, -T, -f, -S, -s malloc,256m; in the
# foreground (-F) and on loopback ports.
exec varnishd -F -a "$BIND:$PORT" -T "127.0.0.1:$ADMIN_PORT" \
    -f /etc/varnish/default.vcl -S /etc/varnish/secret -s "$VARNISH_STORAGE"
