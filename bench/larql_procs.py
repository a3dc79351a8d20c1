"""Servers for the benchmark scripts: a `larql serve|api|router ... --port 0` (or a
link_proxy) started as a child process, its URL read from its start-up line, /v1/health
polled with a deadline; and stopped with SIGTERM, or killed when a run is cut short. Also
what the scripts read from servers and models: a /metrics counter, a streamed completion,
a model's layer count."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request


def start(command, what, health="/v1/health", deadline_s=30):
    """Runs `command` (a list); returns (process, URL) once it listens and, if `health`
    is a path, answers 200 there."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    match = re.search(r"listening on (https?://[0-9.]+:[0-9]+)", line)
    if not match:
        proc.kill()
        sys.exit(f"{what} did not start: {line!r}")
    url = match.group(1)
    if health is None:
        return proc, url
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        try:
            with urllib.request.urlopen(url + health, timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.05)  # polling a server's start-up, bounded by the deadline
    proc.kill()
    sys.exit(f"{what} never became healthy")


def start_shard(larql, model, layers, threads, extra=("--wire-i8",)):
    return start([larql, "serve", model, "--port", "0", "--layers", layers, "--threads", str(threads), *extra], f"shard {layers}")


def add_grid_arguments(ap):
    """The arguments of a benchmark through two shards behind link proxies: the model, the
    binaries, the link, the wire encoding and the rounds."""
    ap.add_argument("model", nargs="?", default="models/demo")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--proxy", default="build/bench/link_proxy")
    ap.add_argument("--link", default="100Mbit/20ms")
    ap.add_argument("--wire", default="f16")
    ap.add_argument("--rounds", type=int, default=2)


def start_halves_behind_proxies(larql, proxy, model, link):
    """Two shards on loopback holding half the model's layers each, a link_proxy in front of
    each; returns (processes to stop, the --ffn map through the proxies)."""
    n = layer_count(model)
    half = n // 2
    ranges = [f"0-{half - 1}", f"{half}-{n - 1}"]
    shards = [start_shard(larql, model, r, 1) for r in ranges]
    proxies = start_proxies(proxy, [url for _, url in shards], link)
    return proxies + shards, ",".join(f"{r}={url}" for r, (_, url) in zip(ranges, proxies))


def start_proxies(proxy, urls, link):
    """A bench/link_proxy in front of each URL, emulating `link` (e.g. 100Mbit/20ms)."""
    return [start([proxy, "--to", url.removeprefix("http://"), "--link", link], "link_proxy", health=None) for url in urls]


def rss_mb(pid):
    """Resident memory of a process, MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def stop(procs):
    """SIGTERM each (process, URL) and wait for it; the servers finish what is in flight."""
    for proc, _ in procs:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def kill(procs):
    for proc, _ in procs:
        proc.kill()


def metric(url, name):
    """A counter from the server's /metrics (0 when it has none)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def completion(url, prompt, max_tokens, timeout):
    """POSTs a greedy /v1/completions to `larql api`; returns the answer's JSON."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def stream_completion(url, prompt, max_tokens, timeout, extra=None):
    """POSTs a greedy streamed /v1/completions to `larql api` (with `extra` fields added to
    the body); yields (monotonic time, chunk) for each server-sent event until [DONE], the
    usage chunk included."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}, **(extra or {})}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                yield time.monotonic(), json.loads(line[6:])


def layer_count(model):
    """num_hidden_layers of a Hugging Face model directory."""
    with open(os.path.join(model, "config.json")) as f:
        return json.load(f)["num_hidden_layers"]


def heldout_prompts(count, words=5):
    """The first `words` words of `count` verses spread over tests/data/kjv-heldout.txt
    (chapters the demo model was not trained on)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "tests", "data", "kjv-heldout.txt")) as f:
        verses = [line.split() for line in f if len(line.split()) > words]
    return [" ".join(v[:words]) for v in verses[:: max(1, len(verses) // count)][:count]]
