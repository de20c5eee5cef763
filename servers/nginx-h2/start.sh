#!/bin/sh
# The plugin hands out the port in $PORT (host networking, on loopback unless $BIND says
# otherwise). $H2_MODE: "tls" (nginx-h2: h2 and HTTP/1.1 by ALPN, a self-signed certificate
# made here at every start, for 127.0.0.1 and localhost) or "h2c" (nginx-h2c: HTTP/2 with
# prior knowledge, plain).
set -eu
: "${PORT:?PORT must be set}"
: "${NGINX_WORKERS:=auto}"
: "${BIND:=127.0.0.1}"  # --webperf-target-bind: where remote workers reach us
: "${H2_MODE:=tls}"
listen="ssl http2"
certificate="ssl_certificate /etc/nginx/tls/server.pem; ssl_certificate_key /etc/nginx/tls/server.key;"
if [ "$H2_MODE" = h2c ]; then
    listen="http2"
    certificate=""
else
    mkdir -p /etc/nginx/tls
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=$BIND" -addext "subjectAltName=IP:$BIND,IP:127.0.0.1,DNS:localhost" \
        -keyout /etc/nginx/tls/server.key -out /etc/nginx/tls/server.pem 2>/dev/null
fi
sed -e "s/@BIND@/$BIND/g" -e "s/@PORT@/$PORT/g" -e "s/@WORKERS@/$NGINX_WORKERS/g" \
    -e "s/@LISTEN@/$listen/" -e "s#@CERTIFICATE@#$certificate#" \
    /etc/nginx/nginx.conf.template > /etc/nginx/nginx.conf
exec nginx -g 'daemon off;'
