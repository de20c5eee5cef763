#!/usr/bin/env bash
# Idempotent set-up shared by the README's two commands:
#   1. a virtual environment in .venv with the project installed (editable; OpenSSL's and
#      libnghttp2's headers first, on Debian/Ubuntu as root, so the native loop speaks TLS
#      and HTTP/2)
#   2. a Docker engine that answers (installs docker.io and starts dockerd
#      on Debian/Ubuntu as root when none runs)
#   3. the base image debian:bookworm-slim (pulled, or built locally with
#      debootstrap from this machine's own apt sources when no registry answers)
#   4. the server images of the catalogue (cached by content hash)
#   5. with WEBPERF_WITH_BROWSER=1 (the test command): headless Chromium
#   6. perf (Debian's linux-perf) as root, for the CPU profiles of A/B runs; optional:
#      without it the runs go on and say why there is no profile
#   7. valgrind and strace (Debian's) as root, for counted measurements (count=True):
#      callgrind counts, strace counts system calls where perf cannot; optional: without
#      valgrind a counted test of a local command fails saying so
# Every step checks first and does nothing when already done.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log() { printf '[webperf setup] %s\n' "$*" >&2; }
die() { printf '[webperf setup] error: %s\n' "$*" >&2; exit 1; }

# Debian's packages, as root: the lists updated once per set-up, and apt waits for
# another apt (unattended upgrades, a second set-up) to let go of its lock.
apt_updated=0
apt_install() {
    if [ "$apt_updated" = 0 ]; then
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

# OpenSSL's headers, so the native loop is built with TLS (setup.py looks for them).
setup_openssl_headers() {
    if [ -f /usr/include/openssl/ssl.h ] || [ -f /usr/local/include/openssl/ssl.h ]; then return; fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "installing libssl-dev (the native loop's TLS)"
        apt_install libssl-dev
    else
        log "OpenSSL's headers are not here: the native loop is built without TLS (https then uses the lean user); install libssl-dev for it"
    fi
}

# libnghttp2's headers, so the native loop speaks HTTP/2 and gRPC (setup.py looks for them).
setup_nghttp2_headers() {
    if [ -f /usr/include/nghttp2/nghttp2.h ] || [ -f /usr/local/include/nghttp2/nghttp2.h ]; then return; fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "installing libnghttp2-dev (the native loop's HTTP/2 and gRPC)"
        apt_install libnghttp2-dev
    else
        log "libnghttp2's headers are not here: the native loop is built without HTTP/2 (http2=True and webperf.grpc then say so); install libnghttp2-dev for it"
    fi
}

# h2load (Debian: nghttp2-client), benchmarks/generator.py's HTTP/2 and gRPC comparison.
setup_h2load() {
    if command -v h2load >/dev/null; then return; fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "installing nghttp2-client (benchmarks/generator.py compares with h2load)"
        apt_install nghttp2-client
    else
        log "h2load is not here: benchmarks/generator.py leaves its rows out; install nghttp2-client for it"
    fi
}

# mosquitto_pub/mosquitto_sub (Debian: mosquitto-clients), benchmarks/mqtt.py's C clients.
setup_mosquitto_clients() {
    if command -v mosquitto_pub >/dev/null; then return; fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "installing mosquitto-clients (benchmarks/mqtt.py compares with mosquitto_pub)"
        apt_install mosquitto-clients
    else
        log "mosquitto_pub is not here: benchmarks/mqtt.py leaves it out; install mosquitto-clients for it"
    fi
}

setup_venv() {
    local py=${PYTHON:-python3}
    command -v "$py" >/dev/null || die "python3 not found: install Python >= 3.10 (apt-get install python3 python3-venv)"
    if [ ! -x .venv/bin/python ]; then
        log "creating .venv"
        "$py" -m venv .venv || die "could not create .venv (on Debian: apt-get install python3-venv)"
    fi
    local stamp=.venv/.webperf-installed
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
        || [ -n "$(find src/pytest_webperf/swarm/native -newer "$stamp")" ]; then
        log "installing pytest-webperf and its dev tools into .venv"
        .venv/bin/python -m pip install --quiet --upgrade pip
        .venv/bin/python -m pip install --quiet -e '.[dev]'
        touch "$stamp"
    fi
}

docker_answers() { timeout 20 docker info >/dev/null 2>&1; }

setup_docker() {
    if docker_answers; then return; fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        die "no Docker engine answers ('docker info' failed). Start one (e.g. 'sudo systemctl start docker'), or run this set-up as root on Debian/Ubuntu so it can install docker.io itself."
    fi
    if ! command -v dockerd >/dev/null; then
        log "installing docker.io from the distribution's packages"
        apt_install docker.io
    fi
    if ! docker_answers; then
        log "starting dockerd (log: /var/log/webperf-dockerd.log)"
        # no systemd in containers/CI sandboxes: start the daemon directly, in a session
        # of its own, so that neither Ctrl-C on this command (SIGINT to the foreground
        # process group) nor the end of the job that ran it stops the engine
        setsid -f dockerd </dev/null >>/var/log/webperf-dockerd.log 2>&1
        for _ in $(seq 1 60); do docker_answers && break; sleep 1; done
    fi
    docker_answers || die "dockerd did not come up; see /var/log/webperf-dockerd.log"
}

# The Debian mirror this machine already uses (deb822 or one-line sources).
apt_mirror() {
    local uri=""
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk '$1=="deb" && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || die "cannot find a Debian mirror in /etc/apt/sources.list(.d); create debian:bookworm-slim yourself (docker pull or docker import)"
    printf '%s\n' "$uri"
}

setup_base_image() {
    local image=debian:bookworm-slim
    if docker image inspect "$image" >/dev/null 2>&1; then return; fi
    log "pulling $image"
    if timeout 120 docker pull -q "$image" >/dev/null 2>&1; then return; fi
    [ "$(id -u)" = 0 ] || die "$image cannot be pulled and building it needs root (debootstrap)"
    command -v debootstrap >/dev/null || {
        log "installing debootstrap"
        apt_install debootstrap
    }
    local mirror rootfs
    mirror=$(apt_mirror)
    rootfs=$(mktemp -d /var/tmp/webperf-rootfs.XXXXXX)
    log "no registry answers: building $image with debootstrap from $mirror (a few minutes, once)"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/var/log/webperf-debootstrap.log 2>&1 \
        || die "debootstrap failed; see /var/log/webperf-debootstrap.log"
    # slim it like the official image: no apt lists, docs or caches
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
           "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
    tar -C "$rootfs" -c . | docker import \
        -c 'CMD ["bash"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        - "$image" >/dev/null
    rm -rf "$rootfs"
    log "created $image locally"
}

# Headless Chromium for the report screenshot test (the test command only).
setup_browser() {
    if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then return; fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        die "the report test needs headless Chromium: install it (e.g. apt-get install chromium)"
    fi
    log "installing chromium from the distribution's packages (the report screenshot test)"
    apt_install chromium
}

# perf for the A/B runs' CPU profiles (py-spy, for Python targets, is in the dev extra).
setup_perf() {
    if command -v perf >/dev/null; then return; fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        log "no perf: A/B runs will have no CPU profiles of native servers (apt-get install linux-perf)"
        return
    fi
    log "installing linux-perf from the distribution's packages (CPU profiles of A/B runs)"
    apt_install linux-perf \
        || log "linux-perf did not install: A/B runs will have no CPU profiles of native servers"
}

# valgrind (callgrind, vgdb) and strace for counted measurements (webperf.http(count=True)).
setup_counting() {
    local missing=()
    { command -v valgrind >/dev/null && command -v vgdb >/dev/null; } || missing+=(valgrind)
    command -v strace >/dev/null || missing+=(strace)
    if [ ${#missing[@]} = 0 ]; then return; fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        log "no ${missing[*]}: counted measurements (count=True) need valgrind, and strace where perf cannot count system calls (apt-get install ${missing[*]})"
        return
    fi
    log "installing ${missing[*]} from the distribution's packages (counted measurements)"
    apt_install "${missing[@]}" \
        || log "${missing[*]} did not install: counted measurements of local commands will fail saying so"
}

setup_images() {
    log "building server images (cached by content hash)"
    .venv/bin/webperf build "$@"
}

main() {
    setup_openssl_headers
    setup_nghttp2_headers
    setup_h2load
    setup_mosquitto_clients
    setup_venv
    setup_docker
    setup_base_image
    setup_perf
    setup_counting
    if [ "${WEBPERF_WITH_BROWSER:-0}" = 1 ]; then setup_browser; fi
    [ "${WEBPERF_SKIP_IMAGES:-0}" = 1 ] || setup_images "$@"
}

main "$@"
