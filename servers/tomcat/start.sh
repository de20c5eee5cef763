#!/bin/sh
# The plugin hands out the port in $PORT (host networking, loopback only); server.xml reads
# it as the system property webperf.port.
set -eu
: "${PORT:?PORT must be set}"
export CATALINA_HOME=/usr/share/tomcat10 CATALINA_BASE=/var/lib/tomcat10
export CATALINA_TMPDIR=/tmp
export CATALINA_OPTS="${CATALINA_OPTS:-} -Dwebperf.port=$PORT"
exec /usr/share/tomcat10/bin/catalina.sh run
