#!/bin/sh
# The plugin hands out the port in $PORT (host networking, loopback only).
set -eu
: "${PORT:?PORT must be set}"
: "${NGINX_WORKERS:=auto}"
sed -e "s/@PORT@/$PORT/g" -e "s/@WORKERS@/$NGINX_WORKERS/g" \
    /etc/nginx/nginx.conf.template > /etc/nginx/nginx.conf
exec nginx -g 'daemon off;'
