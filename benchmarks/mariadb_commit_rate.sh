#!/bin/bash
# MariaDB's serial commit rate on this machine: one connection, autocommit, one INSERT per
# row (what each seed-002 server's in-order MQTT handler does), in the catalogue's MariaDB
# image (built by ./scripts/setup.sh), with innodb_flush_log_at_trx_commit 1 (its default:
# an fsync per commit) and 2. Seed 002's servers store no faster than this, one row at a
# time. Usage: benchmarks/mariadb_commit_rate.sh   (about a minute; loopback only)
set -eu
img=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^webperf/mariadb:' | head -1)
[ -n "$img" ] || { echo "no webperf/mariadb image: run ./scripts/setup.sh first" >&2; exit 1; }
port=$((20000 + RANDOM % 20000))
cid=""
trap '[ -z "$cid" ] || docker rm -f "$cid" >/dev/null 2>&1' EXIT
procedure='DELIMITER //
CREATE PROCEDURE bench(n INT) BEGIN DECLARE i INT DEFAULT 0; WHILE i < n DO
INSERT INTO telemetry (client_id, seq, sent_at, temp, humidity, light, via)
VALUES (1, i, 0, 1, 1, 1, "bench"); SET i = i + 1; END WHILE; END//
'
for flush in 1 2; do
    cid=$(docker run -d --network host -e PORT="$port" \
        -e MARIADB_FLUSH_LOG_AT_TRX_COMMIT="$flush" "$img")
    ready=""
    for _ in $(seq 60); do
        if docker exec "$cid" mariadb -N -e "select 1" webperf >/dev/null 2>&1; then
            ready=1
            break
        fi
        sleep 1
    done
    [ -n "$ready" ] || { echo "MariaDB did not start:" >&2; docker logs "$cid" >&2; exit 1; }
    printf '%s' "$procedure" | docker exec -i "$cid" mariadb webperf
    for n in 5000 5000; do
        t0=$(date +%s.%N)
        docker exec "$cid" mariadb webperf -e "CALL bench($n)"
        t1=$(date +%s.%N)
        awk -v n="$n" -v a="$t0" -v b="$t1" -v f="$flush" 'BEGIN {
            printf "innodb_flush_log_at_trx_commit=%s: %d rows in %.2f s, %.0f a second\n",
                f, n, b - a, n / (b - a) }'
    done
    docker rm -f "$cid" >/dev/null
    cid=""
done
