#!/usr/bin/env bash
# integration/cassandra.sh start|stop|status — a real single-node Apache
# Cassandra on loopback for the meta/cassandra tests and CI.
#
# There is no Cassandra package in Debian, but Apache publishes the server
# to Maven Central as org.apache.cassandra:cassandra-all. start resolves
# its classpath with Maven (the jars stay in ~/.m2 like any other Maven
# artefact; the first run downloads about 80 MiB), writes a minimal
# single-node configuration under a scratch directory, starts
# CassandraDaemon in the background and returns once the CQL port answers
# a protocol handshake; it does nothing if the node runs already. stop
# ends it; status exits 0 if it answers CQL, 3 if not. The node is for
# tests: its data is wiped on every start and on stop.
#
# Environment:
#   STRATAFS_CASSANDRA_VERSION  cassandra-all version (5.0.x runs on Java 17)
#   STRATAFS_CASSANDRA_PORT     CQL port (9042); the internode port is
#                               STRATAFS_CASSANDRA_STORAGE_PORT (7000)
#   STRATAFS_CASSANDRA_DIR      scratch directory: config, data, log, pid
#   STRATAFS_CASSANDRA_CACHE    where the resolved classpath is kept
#   STRATAFS_CASSANDRA_HEAP     maximum heap (1g); the initial heap is 512m
#   STRATAFS_CASSANDRA_WAIT     seconds start waits for CQL (180)
#   JAVA                        the java binary (java on PATH if it is 11
#                               or 17, else a Java 17 under /usr/lib/jvm)
#
# Tests find the node through STRATAFS_CASSANDRA=127.0.0.1:PORT.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=${STRATAFS_CASSANDRA_VERSION:-5.0.9}
port=${STRATAFS_CASSANDRA_PORT:-9042}
storage_port=${STRATAFS_CASSANDRA_STORAGE_PORT:-7000}
dir=${STRATAFS_CASSANDRA_DIR:-${TMPDIR:-/tmp}/stratafs-cassandra-$port}
cache=${STRATAFS_CASSANDRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stratafs/cassandra}
heap=${STRATAFS_CASSANDRA_HEAP:-1g}
wait_s=${STRATAFS_CASSANDRA_WAIT:-180}
java=${JAVA:-}
pidfile=$dir/cassandra.pid
log=$dir/log/system.log
out=$dir/log/stdout.log

die() {
	echo "cassandra.sh: $*" >&2
	exit 1
}

# pid prints the server's pid if it is running.
pid() {
	local p
	[[ -f $pidfile ]] || return 1
	p=$(<"$pidfile")
	[[ -n $p ]] && kill -0 "$p" 2>/dev/null || return 1
	echo "$p"
}

# cql_answers sends a native-protocol v4 OPTIONS frame and checks that a
# SUPPORTED frame (opcode 0x06) comes back: an open port alone may belong
# to a server that is still starting, or to something else entirely.
cql_answers() {
	local reply
	reply=$(timeout 3 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "\x04\x00\x00\x00\x05\x00\x00\x00\x00" >&3
		head -c 5 <&3 | od -An -tx1
	' _ "$port" 2>/dev/null) || return 1
	[[ $(echo $reply) == "84 00 00 00 06" ]]
}

# find_java sets java to a Java that Cassandra 5.0 runs on: 11 or 17.
find_java() {
	[[ -n $java ]] && return
	local j v
	for j in java /usr/lib/jvm/java-17-openjdk-*/bin/java /usr/lib/jvm/*17*/bin/java; do
		command -v "$j" >/dev/null || continue
		v=$("$j" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
		if [[ $v == 11 || $v == 17 ]]; then
			java=$j
			return
		fi
	done
	die "Cassandra $version needs Java 11 or 17, found none: apt-get install openjdk-17-jre-headless"
}

# classpath prints the server's classpath, resolving it with Maven the
# first time (and again if a jar it names has gone from ~/.m2).
classpath() {
	local cpfile=$cache/$version.classpath cp jar
	if [[ -s $cpfile ]]; then
		cp=$(<"$cpfile")
		local ok=1
		IFS=: read -ra jars <<<"$cp"
		for jar in "${jars[@]}"; do
			[[ -f $jar ]] || { ok=0; break; }
		done
		if ((ok)); then
			echo "$cp"
			return
		fi
	fi
	command -v mvn >/dev/null || die "Maven (mvn) is needed to fetch cassandra-all $version: apt-get install maven"
	mkdir -p "$cache"
	echo "cassandra.sh: resolving cassandra-all $version with Maven (first run only)" >&2
	local mvnlog=$cache/mvn.log
	if ! mvn -B -q -f "$here/cassandra/pom.xml" -Dcassandra.version="$version" \
		dependency:build-classpath -Dmdep.outputFile="$cpfile.tmp" >"$mvnlog" 2>&1; then
		tail -n 30 "$mvnlog" >&2
		die "Maven could not resolve cassandra-all $version (log: $mvnlog)"
	fi
	mv "$cpfile.tmp" "$cpfile"
	cat "$cpfile"
}

# configure writes the node's cassandra.yaml and logback.xml.
configure() {
	mkdir -p "$dir/conf" "$dir/log" "$dir/data"
	cat >"$dir/conf/cassandra.yaml" <<EOF
# Written by integration/cassandra.sh: one node on loopback, for tests.
cluster_name: stratafs-test
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$storage_port"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: $storage_port
native_transport_port: $port
start_native_transport: true
auto_bootstrap: false
data_file_directories:
  - $dir/data/data
commitlog_directory: $dir/data/commitlog
saved_caches_directory: $dir/data/saved_caches
hints_directory: $dir/data/hints
cdc_raw_directory: $dir/data/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
# Test runs create and drop their keyspaces: no snapshots of them.
auto_snapshot: false
# Paxos v2 needs fewer round trips per LWT and copes better with the
# contention the concurrency tests create.
paxos_variant: v2
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
EOF
	cat >"$dir/conf/logback.xml" <<EOF
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF
}

start() {
	if pid >/dev/null; then
		cql_answers || wait_cql "$(pid)"
		return
	fi
	find_java
	local cp t0=$SECONDS
	cp=$(classpath)
	rm -rf "$dir/data" "$dir/log"
	configure
	# The module flags are the ones Cassandra needs on Java 17: it reaches
	# into JDK internals for off-heap memory, direct I/O and its own
	# instrumentation.
	local opts=(
		-Xms512m "-Xmx$heap" -Xss512k -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError
		-Djava.net.preferIPv4Stack=true
		-Djdk.attach.allowAttachSelf=true
		-Dcassandra-foreground=yes
		-Dcassandra.config="file://$dir/conf/cassandra.yaml"
		-Dcassandra.storagedir="$dir/data"
		-Dcassandra.logdir="$dir/log"
		-Dcassandra.triggers_dir="$dir/conf"
		-Dlogback.configurationFile="$dir/conf/logback.xml"
		-Dcassandra.skip_wait_for_gossip_to_settle=0
		-Dcassandra.ring_delay_ms=100
		-Dcassandra.superuser_setup_delay_ms=0
	)
	local m
	for m in java.base/jdk.internal.misc java.base/jdk.internal.ref java.base/sun.nio.ch \
		java.management.rmi/com.sun.jmx.remote.internal.rmi java.rmi/sun.rmi.registry \
		java.rmi/sun.rmi.server java.sql/java.sql; do
		opts+=(--add-exports "$m=ALL-UNNAMED")
	done
	for m in java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref \
		java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module \
		java.base/jdk.internal.util.jar jdk.management/com.sun.management.internal \
		java.base/sun.nio.ch java.base/java.io java.base/java.nio java.base/java.util.concurrent \
		java.base/java.lang java.base/java.util java.base/java.net; do
		opts+=(--add-opens "$m=ALL-UNNAMED")
	done
	nohup "$java" "${opts[@]}" -cp "$cp" org.apache.cassandra.service.CassandraDaemon \
		>"$out" 2>&1 </dev/null &
	echo $! >"$pidfile"
	wait_cql "$!"
	echo "cassandra $version answers CQL on 127.0.0.1:$port (pid $(<"$pidfile"), up in $((SECONDS - t0))s)"
}

# wait_cql waits until the server with pid $1 answers CQL, and fails with
# the end of its logs if it dies or the wait runs out.
wait_cql() {
	local p=$1 deadline=$((SECONDS + wait_s))
	until cql_answers; do
		if ! kill -0 "$p" 2>/dev/null; then
			tail -n 40 "$out" "$log" >&2 2>/dev/null || true
			rm -f "$pidfile"
			die "cassandra exited before CQL answered on 127.0.0.1:$port (logs in $dir/log)"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 40 "$out" "$log" >&2 2>/dev/null || true
			die "cassandra (pid $p) did not answer CQL on 127.0.0.1:$port within ${wait_s}s (logs in $dir/log)"
		fi
		sleep 0.5
	done
	# Another server on the port would answer for a node that died.
	kill -0 "$p" 2>/dev/null || die "cassandra (pid $p) exited, yet something answers CQL on 127.0.0.1:$port"
}

stop() {
	local p
	if p=$(pid); then
		kill "$p"
		for _ in $(seq 60); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$p" 2>/dev/null; then
			kill -9 "$p"
		fi
	fi
	rm -f "$pidfile"
	rm -rf "$dir/data"
}

status() {
	local p
	if ! p=$(pid); then
		echo "cassandra: stopped"
		return 3
	fi
	if cql_answers; then
		echo "cassandra: running (pid $p), CQL on 127.0.0.1:$port"
		return 0
	fi
	echo "cassandra: starting (pid $p), CQL not yet answering on 127.0.0.1:$port"
	return 3
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*) die "usage: $0 start|stop|status" ;;
esac
