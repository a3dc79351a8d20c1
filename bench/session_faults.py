#!/usr/bin/env python3
"""Sessions through a router while replicas die: issue 75's fault run, by hand (not in CI).

  bench/session_faults.py [MODEL] [--larql build/larql] [--seconds 60] [--kill-every 10]

Two session replicas per range (the model's layers in two halves, `larql serve --sessions
--session-idle-s 15`), a `larql router` over them, `larql api --remote-layers ROUTER --wire
f32 --parallel 4` and, beside it, `larql loadtest --sessions ROUTER` (opens, steps, forks,
deletes, abandoned sessions, malformed bodies; 410s tolerated). Four clients ask the API for
greedy completions for --seconds; every --kill-every seconds one replica (never the last
live one of its range) is SIGKILLed and restarted on its own port. Reported: answers, how
many equal a local server's (f32: all of them must), the API's replays, the load test's
verdict, and the router's resident memory after warm-up, at the end of the load and once
its sessions have ended."""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import completion, heldout_prompts, layer_count, metric, rss_mb, start, stop  # noqa: E402


def complete(url, prompt, tokens=24):
    return completion(url, prompt, tokens, timeout=120)["choices"][0]["text"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="models/demo")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--kill-every", type=float, default=10)
    a = ap.parse_args()
    n = layer_count(a.model)
    ranges = [f"0-{n // 2 - 1}", f"{n // 2}-{n - 1}"]
    prompts = heldout_prompts(12)

    def shard(layers, port=0):
        return start([a.larql, "serve", a.model, "--port", str(port), "--layers", layers, "--threads", "1", "--sessions",
                      "--session-idle-s", "15"], f"shard {layers}")

    local = start([a.larql, "api", a.model, "--port", "0", "--threads", "1"], "local api", health="/health")
    expected = {p: complete(local[1], p) for p in prompts}
    stop([local])

    replicas = {r: [shard(r), shard(r)] for r in ranges}
    spec = ",".join(f"{r}={'|'.join(url for _, url in replicas[r])}" for r in ranges)
    router = start([a.larql, "router", "--port", "0", "--shards", spec], "router")
    api = start([a.larql, "api", a.model, "--port", "0", "--threads", "1", "--wire", "f32", "--parallel", "4",
                 "--remote-layers", router[1]], "api", health="/health")
    complete(api[1], prompts[0])  # warm: the router's pools and the sessions' first opens
    router_start = rss_mb(router[0].pid)
    loadtest = subprocess.Popen([a.larql, "loadtest", router[1], "--sessions", "--seconds", str(a.seconds), "--clients", "2",
                                 "--tolerate", "410", "--json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + a.seconds
    answers, equal, failures, lock = 0, 0, [], threading.Lock()

    def client(k):
        nonlocal answers, equal
        i = k
        while time.monotonic() < deadline:
            p = prompts[i % len(prompts)]
            i += 4
            try:
                text = complete(api[1], p)
            except Exception as e:  # an answer that did not complete is the failure this run looks for
                with lock:
                    failures.append(f"{p!r}: {e}")
                continue
            with lock:
                answers += 1
                equal += text == expected[p]

    clients = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in clients:
        t.start()
    kills, which = 0, 0
    while time.monotonic() + a.kill_every < deadline:
        time.sleep(a.kill_every)  # the kills' schedule, not a synchronisation
        r = ranges[which % 2]
        i = (which // 2) % 2
        which += 1
        proc, url = replicas[r][i]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        replicas[r][i] = shard(r, int(url.rsplit(":", 1)[1]))
        kills += 1
    for t in clients:
        t.join()
    lt_out, _ = loadtest.communicate(timeout=600)
    replays = metric(api[1], "larql_api_session_replays_total")
    router_end = rss_mb(router[0].pid)
    # Then with no session left: the API's kept prefixes closed with it, the load test's
    # abandoned ones forgotten after the shards' idle time (polled, with a deadline).
    stop([api])
    drained_by = time.monotonic() + 60
    while metric(router[1], "larql_router_sessions_open") > 0 and time.monotonic() < drained_by:
        time.sleep(0.5)
    time.sleep(1.5)  # the router trims its heap on its next second's round after the last session ends
    left = metric(router[1], "larql_router_sessions_open")
    router_drained = rss_mb(router[0].pid)
    stop([router] + [p for r in ranges for p in replicas[r]])
    try:
        report = json.loads(lt_out[lt_out.index("{"):])
        load = next((v for v in report.values() if isinstance(v, dict) and "steps" in v), {})
        verdict = (f"exit {loadtest.returncode}, {load.get('opens', '?')} opens, {load.get('forks', '?')} forks, "
                   f"{load.get('steps', '?')} steps, {load.get('unexpected', '?')} unexpected, failures {report.get('failures', '?')}")
    except ValueError:
        verdict = f"exit {loadtest.returncode}: {lt_out[-400:]!r}"
    print(f"{a.seconds:.0f} s, {kills} replicas killed and restarted: {answers} answers, {equal} equal to the local "
          f"server's, {len(failures)} failed; replays {replays:.0f}; loadtest --sessions beside: {verdict}; router "
          f"resident {router_start:.1f} MiB after warm-up, {router_end:.1f} MiB at the end of the load, "
          f"{router_drained:.1f} MiB once its sessions ended ({left:.0f} open)")
    if loadtest.returncode != 0:
        print(lt_out[-3000:])
    for f in failures[:5]:
        print("  failed:", f)
    sys.exit(0 if answers and equal == answers and not failures and loadtest.returncode == 0 else 1)


if __name__ == "__main__":
    main()
