#!/usr/bin/env bash
# Runs tritonclient, the KServe SDK and perf_analyzer against a real `cluster-serving start`
# serving Triton's example models with their config.pbtxt (make_repo.py builds the repository).
# Builds no clients: setup.sh fills TRITON_CLIENTS first (docs/testing.md, `make triton-clients`).
# Usage: TRITON_CLIENTS=DIR run.sh /path/to/cluster-serving [check-name-filter...]
#   PA=/path/to/perf_analyzer   perf_analyzer to use (default: TRITON_CLIENTS/pa-install/bin;
#                               without one, pa_sequence.py replays its call sequence)
#   ORT=/path/libonnxruntime.so.1 (default: $ONNXRUNTIME_LIB, then the cache `make ort` fills)
#   KEEP=1                      leave the work dir (config, server log, outputs) in place
# Prints one PASS/FAIL line per check, then a table; exits 1 if any check failed.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="${1:?usage: run.sh /path/to/cluster-serving}"
shift
FILTER=("$@")
TC="$(cd "${TRITON_CLIENTS:?TRITON_CLIENTS: the directory setup.sh filled}" && pwd)"
PY=/usr/bin/python3 # Debian's python3: grpcio, protobuf, numpy, geventhttpclient, aiohttp, httpx
ORT="${ORT:-${ONNXRUNTIME_LIB:-$HOME/.cache/cluster-serving/onnxruntime-1.24.1/libonnxruntime.so.1}}"
PA="${PA:-$TC/pa-install/bin/perf_analyzer}"

WORK="$(mktemp -d /tmp/triton-check.XXXXXX)"
RESULTS="$WORK/results.txt"
: >"$RESULTS"
$PY "$HERE/make_repo.py" "$WORK/repo" "$TC" >/dev/null || exit 1
read -r NATS HTTP GRPC METRICS < <($PY -c '
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

cat >"$WORK/config.yaml" <<EOF
modelRepository: $WORK/repo
modelRepositoryPoll: -1
jobName: tritoncheck
queueStorage: memory
queueMaxBytes: 67108864 # 64 MiB a job: memory streams reserve it, and the repository has some 20 jobs
natsListen: 127.0.0.1:$NATS
natsStoreDir: $WORK/jetstream
httpInterface: 127.0.0.1
httpPort: $HTTP
grpcPort: $GRPC
metricsListen: 127.0.0.1:$METRICS
threadPerModel: 1
httpRequestTimeout: 5000
onnxruntimeLib: $ORT
EOF

export XDG_RUNTIME_DIR="$WORK/run" # its own pid files: another job's `start` is not disturbed
mkdir -p "$XDG_RUNTIME_DIR"
"$BIN" start -c "$WORK/config.yaml" >"$WORK/server.log" 2>&1 &
SERVER=$!
cleanup() {
	kill -INT "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
	[ -n "${KEEP:-}" ] && echo "work dir kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

for _ in $(seq 120); do
	curl -sf -o /dev/null "http://127.0.0.1:$HTTP/v2/health/ready" && break
	kill -0 "$SERVER" 2>/dev/null || break
	sleep 0.5
done
if ! curl -sf -o /dev/null "http://127.0.0.1:$HTTP/v2/health/ready"; then
	echo "FAIL server.ready: not ready within 60 s; server log:"
	tail -20 "$WORK/server.log"
	exit 1
fi
echo "server ready: HTTP 127.0.0.1:$HTTP, gRPC 127.0.0.1:$GRPC ($BIN)"

wanted() { # wanted NAME: true when no filter is given or NAME contains one of them
	[ ${#FILTER[@]} -eq 0 ] && return 0
	for f in "${FILTER[@]}"; do [[ "$1" == *"$f"* ]] && return 0; done
	return 1
}

run_py() { # run_py PYTHONPATH SCRIPT: keeps its PASS/FAIL lines
	METRICS="127.0.0.1:$METRICS" PYTHONPATH="$1" timeout 900 $PY "$HERE/$2" "127.0.0.1:$HTTP" "127.0.0.1:$GRPC" "${FILTER[@]}" 2>"$WORK/$2.stderr" |
		grep -E '^(PASS|FAIL) ' | tee -a "$RESULTS"
}

run_py "$TC/py" check_tritonclient.py # its checks are http.* and grpc.*; a filter picks among them
run_py "$TC/py" scheduling.py # sched.*: priorities, queue policy, cancellation, warmup
if wanted kserve; then
	PYTHONPATH="$TC/kserve_py" timeout 300 $PY "$HERE/check_kserve.py" "127.0.0.1:$HTTP" "127.0.0.1:$GRPC" \
		2>"$WORK/kserve.stderr" | grep -E '^(PASS|FAIL) ' | tee -a "$RESULTS"
fi

# perf_analyzer when setup.sh built it (its `pa` step), else pa_sequence.py replays its calls.
pa_check() { # pa_check NAME MODEL PROTOCOL URL [more perf_analyzer flags]
	local name="$1" model="$2" proto="$3" url="$4"
	shift 4
	wanted "$name" || return 0
	local out="$WORK/$name.out"
	timeout 240 "$PA" -m "$model" -i "$proto" -u "$url" --concurrency-range 1:4 \
		--measurement-interval 1000 --max-trials 20 -s 50 -f "$WORK/$name.csv" "$@" >"$out" 2>&1
	local rc=$?
	$PY "$HERE/pa_parse.py" "$name" "$rc" "$out" | tee -a "$RESULTS"
}
if [ -x "$PA" ]; then
	echo "perf_analyzer: $PA"
	pa_check pa.http.sweep simple http "127.0.0.1:$HTTP"
	pa_check pa.grpc.sweep simple grpc "127.0.0.1:$GRPC"
	pa_check pa.grpc.streaming simple grpc "127.0.0.1:$GRPC" --streaming
	pa_check pa.http.async simple http "127.0.0.1:$HTTP" --async
	pa_check pa.grpc.async simple grpc "127.0.0.1:$GRPC" --async
	pa_check pa.http.shm_system simple http "127.0.0.1:$HTTP" --shared-memory system
	pa_check pa.grpc.shm_system simple grpc "127.0.0.1:$GRPC" --shared-memory system
	pa_check pa.http.densenet_reshape densenet_onnx http "127.0.0.1:$HTTP"
	pa_check pa.http.dynamic_batching simple_dyna http "127.0.0.1:$HTTP"
	pa_check pa.grpc.max_batch_size_0 simple_nobatch grpc "127.0.0.1:$GRPC" --shape INPUT0:1,16 --shape INPUT1:1,16
	# ensembles (make_repo.py): pa_parse.py checks the "Composing models:" breakdown
	pa_check pa.http.ensemble_diamond diamond http "127.0.0.1:$HTTP"
	pa_check pa.grpc.ensemble_diamond diamond grpc "127.0.0.1:$GRPC"
	pa_check pa.http.ensemble_pinned pinned http "127.0.0.1:$HTTP"
	pa_check pa.grpc.ensemble_nested nested grpc "127.0.0.1:$GRPC"
else
	echo "perf_analyzer not built ($PA): running pa_sequence.py (its call sequence) instead"
	if wanted pa; then
		PYTHONPATH="$TC/py" timeout 600 $PY "$HERE/pa_sequence.py" "127.0.0.1:$HTTP" "127.0.0.1:$GRPC" \
			2>"$WORK/pa_sequence.stderr" | grep -E '^(PASS|FAIL) ' | tee -a "$RESULTS"
	fi
fi

if ! kill -0 "$SERVER" 2>/dev/null; then
	echo "FAIL server.alive: the server exited during the checks" | tee -a "$RESULTS"
	tail -20 "$WORK/server.log"
fi
if grep -q -E 'panic:|fatal error:' "$WORK/server.log"; then
	echo "FAIL server.no_panic: $(grep -m1 -E 'panic:|fatal error:' "$WORK/server.log")" | tee -a "$RESULTS"
fi

echo
printf '%-52s %s\n' CHECK RESULT
printf '%-52s %s\n' ----- ------
awk '{ name=$2; sub(":$", "", name); r=$1; $1=""; $2=""; sub(/^  /, ""); printf "%-52s %s%s\n", name, r, ($0 != "" ? "  " substr($0, 1, 110) : "") }' "$RESULTS"
pass=$(grep -c '^PASS' "$RESULTS")
fail=$(grep -c '^FAIL' "$RESULTS")
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
