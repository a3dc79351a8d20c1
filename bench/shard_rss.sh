#!/bin/bash
# Resident memory of a shard before and after one walk-ffn call to each layer it owns:
# the owned layers' FFN weights only (copied to huge pages at start-up; with
# LARQL_HUGE_PAGES=0 the file is mapped and they come in with the call).
#   bench/shard_rss.sh MODEL A-B [HIDDEN]      e.g. build/models/synth-0.85b-q8_0.gguf 0-3 2048
set -eu
model=$1; layers=$2; hidden=${3:-2048}
log=$(mktemp)
${LARQL:-build/larql} serve $model --port 0 --threads 2 --layers $layers > "$log" 2>&1 &
pid=$!
for i in $(seq 50); do grep -q listening "$log" && break; sleep 0.2; done
url=$(grep -o "http://[0-9.:]*" "$log" | head -1)
before=$(grep VmRSS /proc/$pid/status | awk '{print $2}')
python3 - "$url" "$layers" "$hidden" <<'PY'
import json, sys, urllib.request
url, layers, hidden = sys.argv[1], sys.argv[2], int(sys.argv[3])
a, b = map(int, layers.split('-'))
body = json.dumps({"layers": list(range(a, b + 1)), "residual": [0.01] * hidden, "seq_len": 1, "full_output": True}).encode()
req = urllib.request.Request(url + "/v1/walk-ffn", data=body, headers={"Content-Type": "application/json"})
r = urllib.request.urlopen(req).read()
print("answer bytes", len(r))
PY
after=$(grep VmRSS /proc/$pid/status | awk '{print $2}')
echo "$model layers $layers: RSS before $((before/1024)) MB, after one call per layer $((after/1024)) MB"
kill $pid; wait $pid 2>/dev/null || true
rm -f "$log"
