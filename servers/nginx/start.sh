#!/bin/sh
# The plugin hands out the port in $PORT (host networking, on loopback
# unless $BIND says otherwise).
set -eu
: "${PORT:?PORT must be set}"
: "${NGINX_WORKERS:=auto}"
: "${NGINX_MASTER:=on}"  # off: one process (a counted start: see server.toml [count])
: "${BIND:=127.0.0.1}"  # --webperf-target-bind: where remote workers reach us
sed -e "s/@BIND@/$BIND/g" -e "s/@PORT@/$PORT/g" -e "s/@WORKERS@/$NGINX_WORKERS/g" \
    /etc/nginx/nginx.conf.template > /etc/nginx/nginx.conf
exec nginx -g "daemon off; master_process $NGINX_MASTER;"
