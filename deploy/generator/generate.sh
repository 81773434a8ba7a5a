#!/bin/sh
# The demo stream of the docker-compose stack: every INTERVAL seconds, a
# batch of BATCH events from `streamlearn generate` (a new seed each batch:
# label 1 exactly when v >= 0.37, NOISE the probability of flipping one)
# published into the source with `streamlearn publish PUBLISH_ARGS`.
# ITERATIONS batches, or forever when 0. Run by the generator service
# (docker-compose.yml) and by cmd/streamlearn/compose_test.go.
set -eu

: "${PUBLISH_ARGS:=--kind kafka --brokers kafka:9092 --topic events}"
: "${BATCH:=200}"
: "${INTERVAL:=1}"
: "${NOISE:=0}"
: "${ITERATIONS:=0}"
: "${SEED:=1}"

batch="${TMPDIR:-/tmp}/streamlearn-batch.$$.jsonl"
trap 'rm -f "$batch"' EXIT
trap 'exit 0' INT TERM

i=0
while [ "$ITERATIONS" -eq 0 ] || [ "$i" -lt "$ITERATIONS" ]; do
	streamlearn generate -n "$BATCH" --seed "$((SEED + i))" --noise "$NOISE" -o "$batch"
	# PUBLISH_ARGS is split into words on purpose.
	# shellcheck disable=SC2086
	streamlearn publish $PUBLISH_ARGS "$batch" >/dev/null
	i=$((i + 1))
	if [ "$ITERATIONS" -eq 0 ] || [ "$i" -lt "$ITERATIONS" ]; then
		sleep "$INTERVAL"
	fi
done
echo "generator: published $i batches of $BATCH events"
