"""Render soak results (the JSON of `python -m soak.run --out FILE`) as the
markdown tables of docs/reliability.md:

    python -m soak.report results.json [more.json ...]

A campaign found in several files is taken from the last one."""

import json
import sys


def _mib(b):
    return f"{b / (1 << 20):.0f} MiB"


def kill9(s):
    out = ["| operation killed | trials | acknowledged before the kill | interrupted, found committed (whole) | interrupted, found absent | calibrated duration |",
           "| --- | --- | --- | --- | --- | --- |"]
    for k, v in s["by_kind"].items():
        out.append(f"| {k} | {v['trials']} | {v['acked']} | {v['interrupted_committed']} | {v['interrupted_absent']} | {s['calibration_ms'][k]} ms |")
    out.append("")
    out.append(f"{s['trials']} trials in {s['seconds']} s; problems found: {len(s['failures'])}. "
               f"Uncommitted fragment directories left by killed writes: {s['leftover_fragments']}; "
               f"removed by the final `vacuum` (mode fragments): {s.get('vacuum_removed_uncommitted', 'n/a')}; "
               f"left after it: {s.get('leftover_after_vacuum', 'n/a')}.")
    return out


def corrupt(s):
    calls = ["describe", "read", "get_metadata", "list_fragments"]
    out = ["| file kind | trials | " + " | ".join(calls) + " |", "| --- | --- | " + " | ".join("---" for _ in calls) + " |"]
    for kind, oc in s["outcomes"].items():
        n = sum(v for k, v in oc.items() if k.startswith("read:"))
        cells = []
        for c in calls:
            parts = sorted(((k.split(":", 1)[1], v) for k, v in oc.items() if k.startswith(c + ":")), key=lambda x: -x[1])
            cells.append(", ".join(f"{code} {v}" for code, v in parts))
        out.append(f"| {kind} | {n} | " + " | ".join(cells) + " |")
    out.append("")
    out.append(f"{s['trials']} trials in {s['seconds']} s: crashes {s['crashes']}, calls past their deadline {s['hangs']}, "
               f"slowest call {s['slowest_call_s']} s, wrong data from a data file with a checksum filter: "
               f"{sum(1 for f in s['failures'] if 'checksum' in f)}, wrong data from the array without checksums: "
               f"{s['wrong_data_without_checksum']}; problems found: {len(s['failures'])}.")
    return out


def load(s):
    out = [f"{s['clients']} clients, {s['seconds_per_round']} s per round, 30% writes (1-100 rows each) and 70% reads (a 4096-wide slice).", "",
           "| round | acknowledged DoPuts (rows) | reads | ops/s | write p50 / p99 | read p50 / p99 | fragments after | goroutines / FDs after | RSS after, and after a quiet pause | Go heap after GC |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    b = s["baseline"]
    out.insert(1, f"Baseline: {b['goroutines']} goroutines, {b['fds']} FDs, RSS {_mib(b['rss'])}.")
    for i, r in enumerate(s["rounds"], 1):
        a, q = r["after"], r.get("after_quiet", r["after"])
        out.append(f"| {i} | {r['acked_puts']} ({r['acked_rows']}) | {r['reads']} | {r['ops_per_s']} | "
                   f"{r['write_ms']['p50']} / {r['write_ms']['p99']} ms | {r['read_ms']['p50']} / {r['read_ms']['p99']} ms | "
                   f"{r.get('fragments', '')} | {a['goroutines']} / {a['fds']} | {_mib(a['rss'])}, {_mib(q['rss'])} | "
                   f"{_mib(r['heap_after_gc']) if 'heap_after_gc' in r else ''} | ")
    out.append("")
    out.append(f"Rows acknowledged: {s['acked_rows']}; rows flightd reads: {s['flightd_rows']}; rows TileDB reads: {s['tiledb_rows']}; "
               f"errors: {sum(r['errors'] for r in s['rounds'])}; problems found: {len(s['failures'])}.")
    return out


def evil(s):
    nr, idle, h, it = s["never_read"], s["idle"], s["hangups"], s["idle_timeout"]
    out = ["| test | result |", "| --- | --- |",
           f"| {nr['streams']} DoGets of {_mib(nr['result_bytes_each'])} each, never read past the first batch (-memory-budget 16MiB) | RSS grew {_mib(nr['rss_growth'])} (bound checked: {_mib(nr['bound'])}); a small read meanwhile answered in {nr['responsive_s']} s |",
           f"| {idle['grpc_clients']} idle gRPC clients + {idle['raw_sockets']} raw sockets that never speak HTTP/2 | {idle['fds_with_idle']} FDs, {idle['goroutines_with_idle']} goroutines while open; a read answered in {idle['read_latency_s']} s; after closing: {idle['fds_after_close']} FDs, {idle['goroutines_after_close']} goroutines (baseline {s['baseline']['fds']}, {s['baseline']['goroutines']}) |",
           f"| {h['doget_killed']} clients killed mid-DoGet, {h['doput_killed']} mid-DoPut | {h['doput_aborted']:.0f} DoPuts aborted, {h['rows_visible']} rows visible, {h['fragment_dirs_left']} fragment directories left, {h['streams_running_after']:.0f} streams running after |",
           ]
    for d in s["deadlines"]:
        what = ("a DoPut streaming 100-row batches every 10 ms" if d.get("call") == "DoPut"
                else "a DoGet of the whole 128 MiB array")
        srv = f"; the server ended the call after {d['server_s']} s" if "server_s" in d else ""
        out.append(f"| {what}, {d['deadline_s']} s deadline | the client saw {d['code']} after {d['returned_after_s']} s{srv}; nothing written, slot released |")
    out.append(f"| SIGTERM after all of the above | exited 0 in {s['sigterm_stop_s']} s |")
    out.append(f"| {it['connections']} idle connections, -idle-timeout 2s | FDs {it['fds_before']} -> {it['fds_with_idle']} -> {it['fds_after_2s_idle_timeout']} (closed by the server; the clients reconnect) |")
    out.append("")
    out.append(f"Problems found: {len(s['failures'])}.")
    return out


def main(paths):
    res = {}
    for p in paths:
        d = json.load(open(p))
        for k, v in d.items():
            if isinstance(v, dict):
                res[k] = (v, d.get("seed"), p)
    for name, fn in (("kill9", kill9), ("corrupt", corrupt), ("load", load), ("evil", evil)):
        if name in res:
            s, seed, p = res[name]
            print(f"### {name} (seed {seed})\n")
            print("\n".join(fn(s)))
            print()


if __name__ == "__main__":
    main(sys.argv[1:])
