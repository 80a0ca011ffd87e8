#!/usr/bin/env bash
# A 3-node NATS JetStream cluster on 127.0.0.1 for the tests of the NATS log backend.
#
#   .ci/nats-cluster.sh start DIR   writes n1..n3 configs under DIR, starts the servers, waits until
#                                   JetStream has a meta leader, and prints the environment to export
#   .ci/nats-cluster.sh stop DIR    stops the servers started from DIR
#
# Ports: clients 14222-14224, routes 16222-16224, monitoring 18222-18224, shifted by NATS_PORT_OFFSET
# when set, else by the first multiple of 100 whose ports are all free (several runs can share a
# machine). Each server writes its pid to DIR/nN.pid, so a test can kill one (a leader) and start it
# again with `nats-server -c DIR/nN.conf`.
set -euo pipefail

offset="${NATS_PORT_OFFSET:-}"
client_port() { echo $((14221 + $1 + offset)); }
route_port() { echo $((16221 + $1 + offset)); }
http_port() { echo $((18221 + $1 + offset)); }

write_config() {
    local dir="$1" n="$2"
    local routes=""
    for m in 1 2 3; do routes+="\"nats-route://127.0.0.1:$(route_port "$m")\", "; done
    cat > "$dir/n$n.conf" <<CONF
server_name: n$n
listen: 127.0.0.1:$(client_port "$n")
http: 127.0.0.1:$(http_port "$n")
pid_file: "$dir/n$n.pid"
# An append of up to 16 MiB of records is one message.
max_payload: 20971520
jetstream {
  store_dir: "$dir/n$n"
  max_memory_store: 268435456
  max_file_store: 4294967296
}
cluster {
  name: mnemo-test
  listen: 127.0.0.1:$(route_port "$n")
  routes: [ $routes]
}
CONF
}

port_in_use() {
    (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null
}

pick_offset() {
    local candidate port busy
    for candidate in $(seq 0 100 3000); do
        busy=0
        for port in 14222 14223 14224 16222 16223 16224 18222 18223 18224; do
            if port_in_use $((port + candidate)); then busy=1; break; fi
        done
        if [ "$busy" = 0 ]; then echo "$candidate"; return 0; fi
    done
    echo "no free ports for a NATS cluster" >&2
    return 1
}

start() {
    local dir="$1"
    mkdir -p "$dir"
    if [ -z "$offset" ]; then offset="$(pick_offset)"; fi
    for n in 1 2 3; do
        write_config "$dir" "$n"
        nats-server -c "$dir/n$n.conf" > "$dir/n$n.log" 2>&1 &
    done
    # Ready when every server answers its health check and JetStream has elected a meta leader.
    for _ in $(seq 1 300); do
        local ready=1
        for n in 1 2 3; do
            curl -fsS "http://127.0.0.1:$(http_port "$n")/healthz" > /dev/null 2>&1 || ready=0
        done
        if [ "$ready" = 1 ] && curl -fsS "http://127.0.0.1:$(http_port 1)/jsz" 2>/dev/null | grep -q '"leader"'; then
            echo "export MNEMO_TEST_NATS_URLS=nats://127.0.0.1:$(client_port 1),nats://127.0.0.1:$(client_port 2),nats://127.0.0.1:$(client_port 3)"
            echo "export MNEMO_TEST_NATS_DIR=$dir"
            return 0
        fi
        sleep 0.2
    done
    echo "the NATS cluster did not become ready; server logs follow" >&2
    tail -n 30 "$dir"/n*.log >&2 || true
    stop "$dir"
    return 1
}

stop() {
    local dir="$1"
    for n in 1 2 3; do
        if [ -f "$dir/n$n.pid" ]; then
            kill "$(cat "$dir/n$n.pid")" 2> /dev/null || true
        fi
    done
    for n in 1 2 3; do
        if [ -f "$dir/n$n.pid" ]; then
            local pid
            pid="$(cat "$dir/n$n.pid")"
            for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2> /dev/null || true
        fi
    done
}

case "${1:-}" in
    start) start "${2:?usage: $0 start DIR}" ;;
    stop) stop "${2:?usage: $0 stop DIR}" ;;
    *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
