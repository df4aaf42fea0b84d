#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster for the tests: `source .ci/postgres.sh start DIR` exports
# PLENA_OPT_TEST_POSTGRES; `.ci/postgres.sh stop DIR` stops it. The cluster is owned by the
# unprivileged user `postgres` (Debian's package creates it), listens on a Unix socket in DIR
# and on 127.0.0.1:${PGPORT:-54329}, trusts local connections and lives only in DIR.
[[ "${BASH_SOURCE[0]}" == "$0" ]] && set -euo pipefail  # not in a shell that sources it
action="$1" dir="$2"
port="${PGPORT:-54329}"
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$action" in
start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off" \
        start >/dev/null
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres plena_test
    export PLENA_OPT_TEST_POSTGRES="postgresql://postgres@127.0.0.1:$port/plena_test"
    echo "PostgreSQL at $PLENA_OPT_TEST_POSTGRES (stop: bash .ci/postgres.sh stop $dir)" >&2
    ;;
stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
esac
