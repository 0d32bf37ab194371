#!/usr/bin/env python3
"""Breaks a `perf script -F comm,tid,time,ip,sym` dump of the gateway down by phase and by innermost meaningful
frame. Used by profile.sh:  breakdown.py PERF_SCRIPT_TXT CALLS SAMPLE_HZ  (CALLS and HZ turn shares into µs/call).
"""
import sys, re, collections
samples = []; cur = None
for line in open(sys.argv[1], errors='replace'):
    if not line.strip():
        if cur is not None: samples.append(cur); cur = None
        continue
    if not line[0].isspace(): cur = []; continue
    parts = line.strip().split(' ', 1)
    if cur is not None and len(parts) == 2: cur.append(parts[1])
if cur: samples.append(cur)
N = len(samples); calls = float(sys.argv[2]) if len(sys.argv) > 2 else None
hz = float(sys.argv[3]) if len(sys.argv) > 3 else 2000
def pct(n): 
    s = f"{100*n/N:5.1f}%"
    if calls: s += f" {n/hz/calls*1e6:6.1f} µs/call"
    return s
def has(s, p): return any(p.search(f) for f in s)
R = re.compile
phases = [
  ('backend connection task (hyper client conn: write request, read response)', R(r'hyper::client::conn::http1::upgrades::UpgradeableConnection')),
  ('McpBackendClient::request* (build request, reqwest, parse answer)', R(r'McpBackendClient::request')),
  ('front logic minus backend call (parse, session, call task, reply JSON)', R(r'Front::serve_post|Front::serve_in_session|Front::reply')),
  ('agent connection (hyper server: read+parse request, write response)', R(r'axum::serve::handle_connection')),
  ('runtime: scheduler/epoll/park', R(r'tokio::runtime|epoll_wait')),
]
ph = collections.Counter()
for s in samples:
    for name, p in phases:
        if has(s, p): ph[name] += 1; break
    else: ph['other'] += 1
print(f"samples {N}" + (f", {calls:.0f} calls" if calls else ""))
print("== phases (first match, top-down) ==")
for k, v in ph.most_common(): print(pct(v), k)

sem = [
  ('kernel: writev (TCP send incl. loopback delivery + wakeup of peer)', R(r'^(do_writev|vfs_writev)$')),
  ('kernel: recvfrom', R(r'^(__sys_recvfrom|__x64_sys_recvfrom|tcp_recvmsg)$')),
  ('kernel: epoll_wait', R(r'^(do_epoll_wait|__x64_sys_epoll_wait)$')),
  ('kernel: futex', R(r'^(do_futex|__x64_sys_futex)$')),
  ('url parsing', R(r'^url::|<url::')),
  ('serde_json parse', R(r'serde_json::de::|Deserialize')),
  ('serde_json serialize', R(r'serde_json::ser::|Serialize|serde_json::value::ser')),
  ('session token open (HMAC, base64, payload)', R(r'Sealer::open')),
  ('json Value clone', R(r'Value as core::clone::Clone|indexmap.*Clone')),
  ('drop (free)', R(r'drop_in_place')),
  ('HeaderMap ops', R(r'http::header::map')),
  ('reqwest', R(r'reqwest::')),
  ('tower/tower_http', R(r'tower_http::|tower::')),
  ('hyper_util client pool', R(r'hyper_util::client')),
  ('httparse/hyper h1 parse', R(r'httparse|hyper::proto::h1::role')),
  ('hyper other', R(r'hyper::')),
  ('axum', R(r'axum')),
  ('switchyard (own code)', R(r'switchyard::')),
  ('tokio', R(r'tokio::')),
]
se = collections.Counter()
for s in samples:
    for f in s:
        hit = next((name for name, p in sem if p.search(f)), None)
        if hit: se[hit] += 1; break
    else: se['other: ' + s[0][:50]] += 1
print("== innermost semantic frame ==")
for k, v in se.most_common(28): print(pct(v), k)
