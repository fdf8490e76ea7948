#!/usr/bin/env python3
"""The raw content of a trace folder's record files (procs/*.tpgt, src/core/records/trace_file.hpp),
for finding out what CUPTI gives for a new kind of work before the merge is taught it: per process,
each graph chunk (exec, version, CUPTI graph id, nodes, clone ids), the launches per executable, and
the first records of each CUPTI graph id (correlation id, node id, start relative to the first
record, duration, kernel name), then the notes.

    scripts/dump_records.py TRACE_DIR [RECORDS_PER_GRAPH]
"""
import collections
import json
import pathlib
import struct
import sys

RECORD = struct.Struct("<B3xIQQIIIIQQ")  # WireRecord, 56 bytes
LAUNCH = struct.Struct("<IIQQII")  # WireLaunch, 32 bytes
CHUNK = {1: "meta", 2: "device", 3: "name", 4: "graph", 5: "records", 6: "launches", 7: "note", 8: "footer"}


def chunks(data: bytes):
    at = 12
    while at + 8 <= len(data):
        kind, size = struct.unpack_from("<II", data, at)
        payload = data[at + 8 : at + 8 + size]
        if len(payload) < size:
            return
        yield kind, payload
        at += 8 + size


def dump(path: pathlib.Path, per_graph: int) -> None:
    data = path.read_bytes()
    if data[:8] != b"TPGTRACE":
        print(f"{path}: not a record file")
        return
    names, records, launches, notes = {}, [], collections.Counter(), []
    print(f"== {path.name}")
    for kind, payload in chunks(data):
        if kind == 3:
            names[struct.unpack_from("<I", payload)[0]] = payload[4:].decode("utf-8", "replace")
        elif kind == 4:
            g = json.loads(payload)
            nodes = [f"{i}:{n.get('type')}:{n.get('name', '')[:40]}" for i, n in enumerate(g.get("nodes", []))]
            print(f"graph exec {g.get('exec')} v{g.get('version')} graph_id {g.get('graph_id')} "
                  f"nodes {nodes} clones {g.get('clones', [])[:16]} {g.get('topology_error', '')}")
        elif kind == 5:
            records += [RECORD.unpack_from(payload, i) for i in range(0, len(payload) - len(payload) % 56, 56)]
        elif kind == 6:
            for i in range(0, len(payload) - len(payload) % 32, 32):
                launches[LAUNCH.unpack_from(payload, i)[1]] += 1
        elif kind == 7:
            notes.append(payload.decode("utf-8", "replace"))
    print(f"launches per exec: {dict(launches)}; {len(records)} records")
    t0 = min((r[2] for r in records if r[2]), default=0)
    shown = collections.Counter()
    for kind, dev, start, end, stream, corr, gid, name, node, _bytes in records:
        if shown[gid] >= per_graph:
            continue
        shown[gid] += 1
        print(f"  graph {gid} kind {kind} dev {dev} stream {stream} corr {corr} node {node:#x} "
              f"start +{(start - t0) / 1e3:.1f} us dur {(end - start) / 1e3:.1f} us {names.get(name, name)[:50]}")
    per_gid = collections.Counter(r[6] for r in records)
    print(f"records per CUPTI graph id: {dict(per_gid)}")
    for n in notes:
        print(f"note: {n}")


def main() -> int:
    folder = pathlib.Path(sys.argv[1])
    per_graph = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    for path in sorted((folder / "procs").glob("*.tpgt")):
        dump(path, per_graph)
    return 0


if __name__ == "__main__":
    sys.exit(main())
