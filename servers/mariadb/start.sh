#!/bin/sh
# MariaDB 10.11 on 127.0.0.1:$PORT with seed 002's max_connections (20000), capped to what
# the open-files limit allows: each connection holds a descriptor, and MariaDB lowers
# max_connections itself (with only a warning in its log) when the limit is short.
set -eu
: "${PORT:?PORT must be set}"
wanted=${MARIADB_MAX_CONNECTIONS:-20000}
table_cache=400
nofile=$(ulimit -n)
if [ "$nofile" = unlimited ]; then nofile=1048576; fi
# MariaDB's own rule: open_files_limit >= 10 + max_connections + 2 * table_open_cache.
room=$((nofile - 10 - 2 * table_cache - 100))
max=$wanted
if [ "$room" -lt "$wanted" ]; then
    max=$room
    echo "webperf: max_connections capped at $max (wanted $wanted): open-files limit is $nofile"
fi
echo "webperf: max_connections=$max open_files_limit=$nofile"
exec mariadbd \
    --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
    --bind-address=127.0.0.1 --port="$PORT" \
    --max-connections="$max" --open-files-limit="$nofile" --table-open-cache="$table_cache" \
    --skip-name-resolve --skip-log-bin --innodb-use-native-aio=0 \
    --innodb-flush-log-at-trx-commit="${MARIADB_FLUSH_LOG_AT_TRX_COMMIT:-1}" \
    --innodb-buffer-pool-size="${MARIADB_BUFFER_POOL:-256M}" \
    --init-file=/etc/webperf/schema.sql
