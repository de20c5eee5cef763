#!/bin/sh
# The plugin hands out our port in $PORT and apache-php's in $BACKEND_PORT (host networking,
# loopback only).
set -eu
: "${PORT:?PORT must be set}"
: "${BACKEND_PORT:?BACKEND_PORT must be set (the apache-php backend)}"
: "${NGINX_WORKERS:=auto}"
: "${BIND:=127.0.0.1}"  # --webperf-target-bind: where remote workers reach us (apache-php stays on loopback)
# As many open files as the container may have (the engine's limit can be below 65535).
NOFILE=$(ulimit -Hn); [ "$NOFILE" = unlimited ] && NOFILE=1048576
sed -e "s/@NOFILE@/$NOFILE/g" -e "s/@BIND@/$BIND/g" -e "s/@PORT@/$PORT/g" -e "s/@BACKEND_PORT@/$BACKEND_PORT/g" \
    -e "s/@WORKERS@/$NGINX_WORKERS/g" \
    /etc/nginx/nginx.conf.template > /etc/nginx/nginx.conf
exec nginx -g 'daemon off;'
