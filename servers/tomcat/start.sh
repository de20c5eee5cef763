#!/bin/sh
# The plugin hands out the port in $PORT (host networking) and, with --webperf-target-bind,
# the address in $BIND (else loopback only); server.xml reads them as the system properties
# webperf.port and webperf.bind.
set -eu
: "${PORT:?PORT must be set}"
export CATALINA_HOME=/usr/share/tomcat10 CATALINA_BASE=/var/lib/tomcat10
export CATALINA_TMPDIR=/tmp
export CATALINA_OPTS="${CATALINA_OPTS:-} -Dwebperf.port=$PORT -Dwebperf.bind=${BIND:-127.0.0.1}"
exec /usr/share/tomcat10/bin/catalina.sh run
