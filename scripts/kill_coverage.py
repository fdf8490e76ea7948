#!/usr/bin/env python3
"""What a killed traced process kept: reads a trace folder's record files (procs/*.tpgt, the format
of src/core/records/trace_file.hpp) and the kill time (ns, CLOCK_REALTIME, CUPTI's clock), and
prints how many graph launches that had completed 0.5 s before the kill are in the files, against
how many the GPU completed by then (from the first launch's start and the median launch period).

    scripts/kill_coverage.py TRACE_DIR KILLED_NS
"""
import pathlib
import statistics
import struct
import sys

RECORD = struct.Struct("<B3xIQQIIIIQQ")  # WireRecord, 56 bytes
LAUNCH = struct.Struct("<IIQQII")  # WireLaunch, 32 bytes


def read(path: pathlib.Path):
    data = path.read_bytes()
    if data[:8] != b"TPGTRACE":
        raise SystemExit(f"{path}: not a record file")
    at, records, launches, footer = 12, [], set(), False
    while at + 8 <= len(data):
        kind, size = struct.unpack_from("<II", data, at)
        payload = data[at + 8 : at + 8 + size]
        if len(payload) < size:
            break
        if kind == 5:
            records += [RECORD.unpack_from(payload, i) for i in range(0, size - size % RECORD.size, RECORD.size)]
        elif kind == 6:
            launches |= {LAUNCH.unpack_from(payload, i)[0] for i in range(0, size - size % LAUNCH.size, LAUNCH.size)}
        elif kind == 8:
            footer = True
        at += 8 + size
    return records, launches, footer


def main() -> int:
    folder, killed = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    cutoff = killed - 500_000_000
    for path in sorted((folder / "procs").glob("*.tpgt")):
        records, launches, footer = read(path)
        spans = {}
        for _kind, _dev, start, end, _stream, corr, _gid, _name, node, _bytes in records:
            if node == 0 or start == 0 or end < start:
                continue  # not a graph record, or work still running at a forced flush (no times)
            s, e = spans.get(corr, (start, end))
            spans[corr] = (min(s, start), max(e, end))
        kept = sorted(s for c, (s, e) in spans.items() if c in launches and 0 < e <= cutoff)
        starts = sorted(s for s, _ in spans.values())
        if len(starts) < 2:
            print(f"{path.name}: {len(records)} records, {len(launches)} launches: nothing to measure "
                  f"({path.stat().st_size} bytes, footer {footer})")
            continue
        period = statistics.median(b - a for a, b in zip(starts, starts[1:]))
        expected = (cutoff - starts[0]) / period + 1 if cutoff > starts[0] else 0
        share = len(kept) / expected if expected > 0 else float("nan")
        last = (killed - max(e for _, e in spans.values())) / 1e6
        print(f"{path.name}: {len(records)} records, {len(launches)} launches written; "
              f"{len(kept)} of ~{expected:.0f} launches completed 0.5 s before the kill are kept ({share:.1%}); "
              f"period {period / 1e3:.1f} us; the last record ends {last:.0f} ms before the kill; "
              f"{path.stat().st_size} bytes, footer {footer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
