#!/usr/bin/env bash
# How long `run --until-end` takes after three `run` processes of its Kafka
# group were killed with SIGKILL 0.3-1.1s after their start, with the
# default session, rebalance and heartbeat timeouts (10s, 5s, 1s), on a
# kfake broker process that accepts Kafka's default minimum session timeout
# (6s). Prints one line per run: partitions, exit status, wall time, the
# number of reports and of events they cover (want: every partition, all N).
#
#   docs/measure-until-end.sh            # N=200000 events, 3 repetitions
#   N=50000 REPS=5 docs/measure-until-end.sh
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-200000}
REPS=${REPS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
go build -C "$root" -o "$work/streamlearn" ./cmd/streamlearn
go build -C "$root" -o "$work/kfake" ./internal/testbroker/kfake

# The learners of config.yaml, and events keyed by 16 tenants.
awk '/^[a-z_]+:/ { keep = ($1 == "input:" || $1 == "features:" || $1 == "learners:") } keep' \
	"$root/config.yaml" > learners.yaml
./streamlearn generate -n "$N" --seed 3 -o gen.jsonl
awk '{ printf "{\"key\":\"tenant-%d\",%s\n", NR % 16, substr($0, 2) }' gen.jsonl > keyed.jsonl

for parts in 1 3; do
	rm -f addr.txt
	./kfake -partitions "$parts" -topic events -session-min 6s > addr.txt &
	broker=$!
	until [ -s addr.txt ]; do sleep 0.05; done
	bootstrap=$(head -1 addr.txt)
	config() { # group
		cat learners.yaml
		echo "source: {kind: kafka, brokers: [\"$bootstrap\"], topic: events, group: $1}"
		echo "checkpoint: {dir: $work/state-$1, every: 10000}"
	}
	config publish > publish.yaml
	./streamlearn publish -c publish.yaml keyed.jsonl 2> /dev/null
	for rep in $(seq "$REPS"); do
		group="g$parts-$rep"
		config "$group" > "$group.yaml"
		for _ in 1 2 3; do
			./streamlearn run -c "$group.yaml" --http off 2> /dev/null &
			pid=$!
			sleep "0.$((3 + RANDOM % 9))"
			kill -9 "$pid" 2> /dev/null
			wait "$pid" 2> /dev/null
		done
		start=$(date +%s%N)
		./streamlearn run -c "$group.yaml" --until-end --report json --http off > "$group.json" 2> "$group.err"
		code=$?
		end=$(date +%s%N)
		events=$(awk -F'"events":' '{ split($2, a, ","); n += a[1] } END { print n + 0 }' "$group.json")
		printf 'partitions=%d rep=%d exit=%d wall=%d.%02ds reports=%d events=%d\n' \
			"$parts" "$rep" "$code" $(((end - start) / 1000000000)) $(((end - start) / 10000000 % 100)) \
			"$(wc -l < "$group.json")" "$events"
		if [ "$code" != 0 ]; then cat "$group.err"; fi
	done
	kill "$broker"
	wait "$broker" 2> /dev/null
done
