#!/bin/sh
# The plugin hands out the port in $PORT (host networking, on loopback
# unless $BIND says otherwise). The certificate is made here, at every start
# (self-signed, EC P-256, for 127.0.0.1 and localhost): never in the image or in git.
set -eu
: "${PORT:?PORT must be set}"
: "${NGINX_WORKERS:=auto}"
: "${BIND:=127.0.0.1}"  # --webperf-target-bind: where remote workers reach us
mkdir -p /etc/nginx/tls
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=$BIND" -addext "subjectAltName=IP:$BIND,IP:127.0.0.1,DNS:localhost" \
    -keyout /etc/nginx/tls/server.key -out /etc/nginx/tls/server.pem 2>/dev/null
sed -e "s/@BIND@/$BIND/g" -e "s/@PORT@/$PORT/g" -e "s/@WORKERS@/$NGINX_WORKERS/g" \
    /etc/nginx/nginx.conf.template > /etc/nginx/nginx.conf
exec nginx -g 'daemon off;'
