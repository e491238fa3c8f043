#!/usr/bin/env python3
"""Do two runs of one campaign give the same results and prune files, row for row?

    scripts/same-results.py DIR_A DIR_B      (each holding <name>.results.ndjson and <name>.prune.csv,
                                              as `pushcast demo --out DIR` writes them)

Fields that depend on when a row was answered are left out of the comparison: latency_ms,
unregistered_at (the mock stamps a pruned token with the time it answered), and the part of an FCM
message name after `messages/` (the mock names a message by the time it answered). Everything else
must match: outcome, status, reason, message ids, attempts, duplicates, errors, and the prune lines
apart from their unregistered_at column. Exit status 0: the same; 1: differences (the first ten
are printed); 2: bad usage or unreadable files.
"""
import csv
import glob
import json
import os
import sys

TIME_FIELDS = ('latency_ms', 'unregistered_at')


def one(directory, pattern):
    found = sorted(glob.glob(os.path.join(directory, pattern)))
    if len(found) != 1:
        sys.exit(f'same-results: expected one {pattern} in {directory}, found {len(found)}')
    return found[0]


def results(directory):
    rows = {}
    with open(one(directory, '*.results.ndjson'), encoding='utf-8') as f:
        for line in f:
            record = json.loads(line)
            for field in TIME_FIELDS:
                record.pop(field, None)
            if record.get('fcm_name'):
                record['fcm_name'] = record['fcm_name'].split('/messages/')[0] + '/messages/…'
            rows[record['row']] = record
    return rows


def prune(directory):
    with open(one(directory, '*.prune.csv'), encoding='utf-8', newline='') as f:
        lines = list(csv.DictReader(f))
    for line in lines:
        line.pop('unregistered_at', None)
    return sorted(json.dumps(line, sort_keys=True) for line in lines)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    a, b = results(argv[1]), results(argv[2])
    differences = [f'row {row}: {a.get(row)} != {b.get(row)}' for row in sorted(set(a) | set(b)) if a.get(row) != b.get(row)]
    pa, pb = prune(argv[1]), prune(argv[2])
    if pa != pb:
        differences.append(f'prune files differ: {len(pa)} and {len(pb)} lines, {len(set(pa) ^ set(pb))} not in both')
    for line in differences[:10]:
        print(line)
    print(f'{len(a)} and {len(b)} results rows, {len(pa)} and {len(pb)} prune lines: '
          + ('the same, time fields aside' if not differences else f'{len(differences)} differences'))
    return 1 if differences else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
