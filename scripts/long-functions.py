#!/usr/bin/env python3
"""Lists Swift functions in Sources/ longer than a limit (default 70 lines, TigerBeetle's), body
lines counted from the declaration to its closing brace. A function may be longer when a comment
in the 3 lines above it says why ("longer than 70 lines: ...")."""
import pathlib, re, sys

LIMIT = int(sys.argv[1]) if len(sys.argv) > 1 else 70
DECL = re.compile(r'^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|static|final|override|mutating|convenience|nonisolated|@inline\(__always\))\s+)*(func\s+[^\s(<]+|init[?!]?\s*[(<])')

def strip(line):
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    return line.split('//')[0]

found = 0
for path in sorted(pathlib.Path('Sources').rglob('*.swift')):
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = DECL.match(lines[i])
        if not m:
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            code = strip(lines[j])
            depth += code.count('{') - code.count('}')
            if '{' in code: started = True
            if started and depth <= 0: break
            if not started and j > i + 8: break
            j += 1
        length = j - i + 1
        excused = any('longer than' in lines[k].lower() for k in range(max(0, i - 3), i))
        if started and length > LIMIT and not excused:
            found += 1
            print(f'{path}:{i + 1}: {length} lines: {lines[i].strip()[:80]}')
        i += 1
sys.exit(1 if found else 0)
