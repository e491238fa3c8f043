#!/usr/bin/env python3
"""The tidy check: the code rules of pushcast's Sources/, and their single source.

Rules (`python3 scripts/tidy.py --rules` prints them with every exception):

  function-length  a Swift function is at most 70 lines, declaration to closing brace, unless a
                   comment in the 3 lines above it says why ("longer than 70 lines: ...").
  imports          each module imports only the modules of its layer (IMPORT_RULES below, the
                   intended layering of docs/ARCHITECTURE.md), plus Swift and Synchronization.
  syscalls         only the system modules (PushcastSystem: files, processes, signals, the
                   environment; PushcastReactor: the ring, epoll, sockets) call the C library's
                   file, socket, process and environment functions or Foundation's FileManager,
                   FileHandle, ProcessInfo and Process.
  clock            only the system modules read a clock (clock_gettime, Date(), DispatchTime.now,
                   ContinuousClock, SuspendingClock, Reactor.nowNanoseconds(), ...); everything
                   else takes a MonotonicClock / WallClock (PushcastCore) from its caller.

Code that broke a rule when the rule was written is listed file by file, with a reason, in
IMPORT_EXCEPTIONS, SYSCALL_EXCEPTIONS and CLOCK_EXCEPTIONS. They are a ratchet: a new file, or a
new name in a listed file, fails; an entry whose file no longer has what it excuses fails too
(delete it). Comments and string literals are ignored; calls inside string interpolations too.

Usage: tidy.py [--root DIR] [--limit N] [--only RULE[,RULE]]   check DIR/Sources (default: this repo)
       tidy.py --rules                                          print the rules and exceptions
       tidy.py --self-test                                      check the checker on small trees
Exit status: 0 clean, 1 a rule is broken, 2 bad usage.
"""
import argparse
import dataclasses
import pathlib
import re
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve()
REPO = SCRIPT.parent.parent
RULE_NAMES = ('function-length', 'imports', 'syscalls', 'clock')

# ---------------------------------------------------------------------------------------------
# 1. Function length

FUNCTION_LIMIT = 70
EXCUSE = 'longer than'  # in a comment within the 3 lines above the declaration
DECL = re.compile(r'^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|static|final|override|mutating|convenience|nonisolated|@inline\(__always\))\s+)*(func\s+[^\s(<]+|init[?!]?\s*[(<])')

# ---------------------------------------------------------------------------------------------
# 2. Imports: the intended layering. Every module may also import ALWAYS.

ALWAYS = {'Swift', 'Synchronization', '_Concurrency'}
LIBC = {'Glibc', 'Musl'}
SWIFT_MODULES = {'PushcastCore', 'PushcastCommandLine', 'PushcastSchedule', 'PushcastJSON', 'PushcastInput', 'PushcastWire',
                 'PushcastProviderKit', 'PushcastAPNs', 'PushcastFCM', 'PushcastWebPush', 'PushcastProviders', 'PushcastSystem', 'PushcastReactor',
                 'PushcastTransport', 'PushcastDatabase',
                 'PushcastEngine', 'PushcastMock', 'PushcastSimulation', 'PushcastFuzzing'}

# module: (what it may import, why)
IMPORT_RULES = {
    'PushcastCore': (LIBC | {'CPrefetch'}, 'value types every layer shares; libc only for memory (memcpy, explicit_bzero), '
                     'CPrefetch for cache hints'),
    'PushcastCommandLine': (set(), 'the argument parser, help and manual page: depends on nothing'),
    'PushcastSchedule': ({'PushcastCore'}, 'local-time delivery, sans-I/O: zones come in as PushcastCore\'s ZoneRules'),
    'PushcastJSON': (set(), 'the one JSON reader and writer: depends on nothing'),
    'PushcastInput': ({'PushcastCore', 'CCompression'}, 'sans-I/O CSV / NDJSON readers over a ByteSource'),
    'PushcastWire': ({'PushcastCore', 'COpenSSL', 'CNGHTTP2'} | LIBC, 'sans-I/O TLS and HTTP/2 over memory'),
    'PushcastProviderKit': ({'PushcastCore', 'PushcastWire', 'PushcastCommandLine'},
                            'what a provider implements and the catalog type: the engine sees providers only through it'),
    'PushcastAPNs': ({'PushcastCore', 'PushcastJSON', 'PushcastWire', 'PushcastProviderKit', 'PushcastCommandLine', 'COpenSSL'},
                     'the APNs provider; never another provider'),
    'PushcastFCM': ({'PushcastCore', 'PushcastJSON', 'PushcastWire', 'PushcastProviderKit', 'PushcastCommandLine', 'COpenSSL'},
                    'the FCM provider; never another provider'),
    'PushcastWebPush': ({'PushcastCore', 'PushcastJSON', 'PushcastWire', 'PushcastProviderKit', 'PushcastCommandLine', 'COpenSSL'},
                        'the Web Push provider; never another provider'),
    'PushcastProviders': ({'PushcastProviderKit', 'PushcastEngine', 'PushcastAPNs', 'PushcastFCM', 'PushcastWebPush'},
                          'the catalog the command sends to, one line per provider'),
    'PushcastSystem': ({'PushcastCore', 'CSystem'} | LIBC,
                       'a system module: files, the journal, signals, the process, the environment, the clocks'),
    'PushcastReactor': ({'PushcastCore', 'PushcastSystem', 'CURing'} | LIBC,
                        'a system module: the ring, epoll, sockets and timers'),
    'PushcastTransport': ({'PushcastCore', 'PushcastWire', 'PushcastReactor', 'PushcastSystem'} | LIBC,
                          'client and server workers: one thread, one reactor each'),
    'PushcastDatabase': ({'PushcastCore', 'CSQLite', 'CPostgres', 'CMariaDB'} | LIBC,
                         'database clients, used before a campaign starts and by prune-apply'),
    'PushcastEngine': ({'PushcastCore', 'PushcastJSON', 'PushcastWire', 'PushcastTransport', 'PushcastProviderKit',
                        'PushcastInput'},
                       'campaign logic; providers come in through PushcastProviderKit, files, clocks and threads through '
                       'protocols, not PushcastSystem or PushcastReactor'),
    'PushcastMock': ({'PushcastCore', 'PushcastJSON', 'PushcastWire', 'PushcastReactor', 'PushcastSystem', 'PushcastTransport',
                      'PushcastProviderKit'},
                     'the mock server: its listeners answer through PushcastProviderKit\'s responders, named in one file (IMPORT_FILES)'),
    'PushcastSimulation': ({'PushcastCore', 'PushcastJSON', 'PushcastEngine', 'PushcastTransport', 'PushcastWire',
                            'PushcastProviderKit', 'PushcastProviders', 'PushcastAPNs', 'PushcastFCM', 'PushcastInput'},
                           'whole campaigns in memory on a virtual clock: no PushcastReactor, no PushcastSystem'),
    'PushcastFuzzing': ({'PushcastCore', 'PushcastJSON', 'PushcastInput', 'PushcastAPNs', 'PushcastFCM',
                         'PushcastProviderKit', 'PushcastWebPush', 'PushcastWire'}, 'fuzz bodies: pure functions of bytes'),
    'pushcast': ((SWIFT_MODULES - {'PushcastFuzzing'}) | {'Foundation', 'Dispatch'} | LIBC,
                 'the CLI: wires the modules together'),
}

# file: (what it may import beyond its module's rule, why). Not debt: the one file of a module
# that assembles what the rest of it takes through a protocol.
IMPORT_FILES = {
    'Sources/PushcastMock/MockProviders.swift': ({'PushcastAPNs', 'PushcastFCM', 'PushcastWebPush'},
                                                 "where the mock's listeners get their providers' responders"),
    'Sources/PushcastSystem/SystemZoneDirectory.swift': ({'Foundation'},
                                                         "Foundation's TimeZone, which reads the system's zone data: "
                                                         "the ZoneDirectory the CLI hands to local-time delivery"),
}

# (file, module imported): why the import is there today. Each entry is one to remove.
IMPORT_EXCEPTIONS = {
    ('Sources/PushcastMock/MockServer.swift', 'Foundation'): 'NSCondition and NSLock to wait for the server threads (accepted: threads are not I/O)',
    ('Sources/PushcastSimulation/CampaignSimulator.swift', 'PushcastReactor'): 'ReactorConfiguration, a field of the lane settings it fills in',
    ('Sources/PushcastTransport/Threads.swift', 'Foundation'): 'Thread, DispatchGroup, NSLock: worker threads (accepted: threads are not I/O)',
}

# ---------------------------------------------------------------------------------------------
# 3. Syscalls and 4. clock reads: only the system modules. PushcastSystem makes every call below;
# PushcastReactor only those of its sockets, its ring's descriptors and its backend probe.

SYSTEM_MODULES = {'PushcastSystem', 'PushcastReactor'}
REACTOR_CALLS = frozenset({'socket(', 'connect(', 'bind(', 'listen(', 'accept(', 'accept4(', 'read(', 'write(', 'close(',
                           'fcntl(', 'ioctl(', 'fopen(', 'fclose(', 'fread('})
# module: the calls of the syscall rule it may make (None: all of them).
SYSCALL_MODULES = {'PushcastSystem': None, 'PushcastReactor': REACTOR_CALLS}

# C library calls, matched as bare calls: `open(` but not `file.open(`, `reopen(` or `func open(`.
# A file that declares a function, closure, parameter or case of the same name (`func write(`,
# `let open =`, `open: () throws -> T`) is taken to call its own: its bare calls of that name are not counted.
SYSCALL_FUNCTIONS = ('open', 'openat', 'creat', 'read', 'write', 'pread', 'pwrite', 'readv', 'writev', 'close',
                     'unlink', 'unlinkat', 'rename', 'renameat', 'mkdir', 'mkdtemp', 'rmdir', 'ftruncate',
                     'fsync', 'fdatasync', 'fcntl', 'ioctl', 'lseek', 'fstat', 'access', 'socket', 'connect',
                     'bind', 'listen', 'accept', 'accept4', 'getenv', 'setenv', 'fopen', 'fread', 'fwrite',
                     'fclose', 'popen', 'isatty', 'getpid', 'kill', 'signal', 'sigaction', 'usleep',
                     'nanosleep', 'sleep', 'NSTemporaryDirectory')
# Foundation types, matched as names anywhere (not after a `.`); Process only as `Process(`.
SYSCALL_TYPES = ('FileManager', 'FileHandle', 'ProcessInfo')
SYSCALL_PATTERNS = (
    [(name + '(', re.compile(r'(?<![\w.$])' + name + r'\(')) for name in SYSCALL_FUNCTIONS]
    + [(name, re.compile(r'(?<![\w.$])' + name + r'\b')) for name in SYSCALL_TYPES]
    + [('Process(', re.compile(r'(?<![\w.$])Process\('))]
)

# (file, call): why it is there today.
SYSCALL_EXCEPTIONS = {
    ('Sources/PushcastWire/TLSContext.swift', 'access('): "the system trust store is OpenSSL's (docs/ARCHITECTURE.md, Syscalls outside the system modules)",
    ('Sources/PushcastWire/TLSContext.swift', 'getenv('): "SSL_CERT_DIR: the system trust store is OpenSSL's (docs/ARCHITECTURE.md)",
}

CLOCK_PATTERNS = (
    ('clock_gettime(', re.compile(r'(?<![\w.$])clock_gettime\(')),
    ('gettimeofday(', re.compile(r'(?<![\w.$])gettimeofday\(')),
    ('Date()', re.compile(r'(?<![\w.$])Date\(\)')),
    ('Date(timeIntervalSinceNow:', re.compile(r'(?<![\w.$])Date\(\s*timeIntervalSinceNow\s*:')),
    ('DispatchTime.now', re.compile(r'(?<![\w.$])DispatchTime\s*\.\s*now\b')),
    ('ContinuousClock', re.compile(r'(?<![\w.$])ContinuousClock\b')),
    ('SuspendingClock', re.compile(r'(?<![\w.$])SuspendingClock\b')),
    ('Reactor.nowNanoseconds()', re.compile(r'(?<![\w.$])Reactor\s*\.\s*nowNanoseconds\(')),
    ('SystemClock.monotonicNanoseconds()', re.compile(r'(?<![\w.$])SystemClock\s*\.\s*monotonicNanoseconds\(')),
    ('SystemClock.wallClockSeconds()', re.compile(r'(?<![\w.$])SystemClock\s*\.\s*wallClockSeconds\(')),
)

# (file, clock read): why it is there today.
CLOCK_EXCEPTIONS = {
    ('Sources/PushcastTransport/Threads.swift', 'SystemClock.monotonicNanoseconds()'): "ThreadCondition's timed wait: pthread takes an absolute CLOCK_MONOTONIC deadline",
    ('Sources/PushcastMock/MockFCMListener.swift', 'SystemClock.wallClockSeconds()'): "the FCM listener's default wall time (token expiry, message ids): to take a WallClock",
    ('Sources/PushcastMock/MockProjectQuota.swift', 'Reactor.nowNanoseconds()'): "the mock's project quota: to take a MonotonicClock",
    ('Sources/PushcastMock/MockResponder.swift', 'Reactor.nowNanoseconds()'): "the mock's rate limit: to take a MonotonicClock",
    ('Sources/PushcastTransport/LoadGenerator.swift', 'Reactor.nowNanoseconds()'): "bench start and end: to use the clock it is given",
    ('Sources/PushcastTransport/ServerWorker.swift', 'Reactor.nowNanoseconds()'): "server timers (trickle, delays): to use the worker's clock",
}

RULE_FIXES = {
    'imports': 'reach it through a protocol that the caller injects (the CLI wires in the PushcastSystem or '
               'Foundation implementation), or, if the layering itself should change, change IMPORT_RULES in '
               'scripts/tidy.py and docs/ARCHITECTURE.md together',
    'syscalls': 'call a wrapper in PushcastSystem (InputFile, OutputFile, ScratchFile, FileSystem, SecretFile, '
                'CurrentProcess, StopSignals, Environment, ...) or PushcastReactor (sockets), or add one there, '
                'and take it from the caller',
    'clock': 'take a MonotonicClock or WallClock (PushcastCore) from the caller; the CLI passes the '
             "system's SystemClock.Monotonic / SystemWallClock (or Machine.real), tests a ManualClock",
}


# ---------------------------------------------------------------------------------------------
# Reading Swift

STRING_START = re.compile(r'(#*)("""|")')


def blank(src):
    """src with comments and string literals (interpolations included) turned into spaces; lines
    and columns stay where they were."""
    out = list(src)
    n = len(src)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != '\n':
                out[k] = ' '

    def block_comment_end(i):
        depth = 0
        while i < n:
            if src.startswith('/*', i):
                depth, i = depth + 1, i + 2
            elif src.startswith('*/', i):
                depth, i = depth - 1, i + 2
                if depth == 0:
                    return i
            else:
                i += 1
        return n

    def string_end(i, m):
        hashes, quote = m.group(1), m.group(2)
        close, escape = quote + hashes, '\\' + hashes
        j = m.end()
        while j < n:
            if src.startswith(escape, j):
                k = j + len(escape)
                if k < n and src[k] == '(':
                    j = code(k + 1, True) + 1
                else:
                    j = k + 1
            elif src.startswith(close, j):
                return j + len(close)
            elif src[j] == '\n' and quote == '"':
                return j
            else:
                j += 1
        return n

    def code(i, in_interpolation):
        depth = 0
        while i < n:
            c = src[i]
            if c == '/' and src.startswith('//', i):
                j = src.find('\n', i)
                j = n if j < 0 else j
                wipe(i, j)
                i = j
                continue
            if c == '/' and src.startswith('/*', i):
                j = block_comment_end(i)
                wipe(i, j)
                i = j
                continue
            if c in '#"':
                m = STRING_START.match(src, i)
                if m:
                    j = string_end(i, m)
                    wipe(i, j)
                    i = j
                    continue
            if in_interpolation:
                if c == '(':
                    depth += 1
                elif c == ')':
                    if depth == 0:
                        return i
                    depth -= 1
            i += 1
        return n

    code(0, False)
    return ''.join(out)


@dataclasses.dataclass
class SwiftFile:
    rel: str          # Sources/Module/File.swift
    module: str
    raw: list         # lines as written
    code: list        # lines with comments and strings blanked


def swift_files(root):
    sources = root / 'Sources'
    for path in sorted(sources.rglob('*.swift')):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding='utf-8', errors='replace')
        yield SwiftFile(rel, path.relative_to(sources).parts[0], text.splitlines(), blank(text).splitlines())


# ---------------------------------------------------------------------------------------------
# The checks. Each yields (file, line, rule, message); a failure's fix is in the message.

def check_function_length(f, limit):
    i = 0
    while i < len(f.code):
        if not DECL.match(f.code[i]):
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(f.code):
            line = f.code[j]
            depth += line.count('{') - line.count('}')
            if '{' in line:
                started = True
            if started and depth <= 0:
                break
            if not started and j > i + 8:
                break
            j += 1
        length = j - i + 1
        excused = any(EXCUSE in f.raw[k].lower() for k in range(max(0, i - 3), i))
        if started and length > limit and not excused:
            yield (f.rel, i + 1, 'function-length',
                   f'{length} lines, over the limit of {limit}: {f.raw[i].strip()[:80]}. '
                   f'Fix: split it; or, if it must stay whole, say why in a comment in the 3 lines above it '
                   f'("longer than {limit} lines: <why>")')
        i += 1


IMPORT = re.compile(r'^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+'
                    r'(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_]\w*)')


def imports(f):
    for n, line in enumerate(f.code, 1):
        m = IMPORT.match(line)
        if m:
            yield n, m.group(1)


def check_imports(f, rules, exceptions, seen):
    if f.module not in rules:
        yield (f.rel, 1, 'imports', f'module {f.module} has no import rule. '
               f'Fix: add it to IMPORT_RULES in scripts/tidy.py, with the modules its layer may import')
        return
    allowed, why = rules[f.module]
    for n, name in imports(f):
        if name in allowed or name in ALWAYS or name == f.module or name in IMPORT_FILES.get(f.rel, (set(), ''))[0]:
            continue
        if (f.rel, name) in exceptions:
            seen.add((f.rel, name))
            continue
        yield (f.rel, n, 'imports',
               f'{f.module} may not import {name} ({f.module}: {why}; it may import '
               f'{", ".join(sorted(allowed)) or "nothing"}). Fix: {RULE_FIXES["imports"]}')


def local_names(f):
    names = set()
    for line in f.code:
        names.update(re.findall(r'\b(?:func|let|var|case)\s+`?(\w+)', line))
        names.update(re.findall(r'\b(\w+)\s*:\s*(?:@\w+\s+)*\(', line))  # a parameter of function type
    return names


def check_calls(f, rule, patterns, exceptions, seen):
    modules = SYSCALL_MODULES if rule == 'syscalls' else dict.fromkeys(SYSTEM_MODULES)
    if f.module in modules and modules[f.module] is None:
        return
    permitted = modules.get(f.module) or frozenset()
    own = local_names(f) if rule == 'syscalls' else set()
    for n, line in enumerate(f.code, 1):
        for name, pattern in patterns:
            for m in pattern.finditer(line):
                if name.endswith('(') and name[:-1] in own or name in permitted:
                    continue
                if re.search(r'\b(?:func|case)\s+$', line[:m.start()]):
                    continue
                if (f.rel, name) in exceptions:
                    seen.add((f.rel, name))
                    continue
                what = 'a system call' if rule == 'syscalls' else 'a clock read'
                only = ('PushcastSystem (PushcastReactor: sockets and its ring)' if rule == 'syscalls'
                        else ' and '.join(sorted(SYSTEM_MODULES)))
                yield (f.rel, n, rule, f'{name} is {what}, which only {only} makes ({f.module} is not a system '
                       f'module). Fix: {RULE_FIXES[rule]}')


@dataclasses.dataclass
class Rules:
    limit: int = FUNCTION_LIMIT
    imports: dict = dataclasses.field(default_factory=lambda: IMPORT_RULES)
    import_exceptions: dict = dataclasses.field(default_factory=lambda: IMPORT_EXCEPTIONS)
    syscall_exceptions: dict = dataclasses.field(default_factory=lambda: SYSCALL_EXCEPTIONS)
    clock_exceptions: dict = dataclasses.field(default_factory=lambda: CLOCK_EXCEPTIONS)
    only: tuple = RULE_NAMES


def entry_line(rel, name, table):
    """The line of scripts/tidy.py that holds an exception entry, for a stale entry's message."""
    try:
        text = SCRIPT.read_text().splitlines()
    except OSError:
        return 0
    start = next((k for k, line in enumerate(text) if line.startswith(table + ' = {')), 0)
    for k in range(start, len(text)):
        if f"'{rel}'" in text[k] and f"'{name}'" in text[k]:
            return k + 1
    return 0


def check(root, rules):
    failures = []
    seen = {'imports': set(), 'syscalls': set(), 'clock': set()}
    for f in swift_files(root):
        if 'function-length' in rules.only:
            failures += check_function_length(f, rules.limit)
        if 'imports' in rules.only:
            failures += check_imports(f, rules.imports, rules.import_exceptions, seen['imports'])
        if 'syscalls' in rules.only:
            failures += check_calls(f, 'syscalls', SYSCALL_PATTERNS, rules.syscall_exceptions, seen['syscalls'])
        if 'clock' in rules.only:
            failures += check_calls(f, 'clock', CLOCK_PATTERNS, rules.clock_exceptions, seen['clock'])
    tables = (('imports', 'IMPORT_EXCEPTIONS', rules.import_exceptions, 'imports'),
              ('syscalls', 'SYSCALL_EXCEPTIONS', rules.syscall_exceptions, 'calls'),
              ('clock', 'CLOCK_EXCEPTIONS', rules.clock_exceptions, 'calls'))
    for rule, table, entries, verb in tables:
        if rule not in rules.only:
            continue
        for rel, name in sorted(set(entries) - seen[rule]):
            failures.append(('scripts/tidy.py', entry_line(rel, name, table), rule,
                             f'stale exception: {rel} no longer {verb} {name}. '
                             f'Fix: delete its entry from {table} in scripts/tidy.py'))
    return failures


# ---------------------------------------------------------------------------------------------
# --rules

def declared_dependencies(root):
    """Package.swift's dependencies of each source target."""
    try:
        text = (root / 'Package.swift').read_text()
    except OSError:
        return {}
    found = {}
    for m in re.finditer(r'name:\s*"(\w+)"\s*,\s*dependencies:\s*\[([^\]]*)\]', text):
        found[m.group(1)] = set(re.findall(r'"(\w+)"', m.group(2)))
    for m in re.finditer(r'\.target\(\s*name:\s*"(\w+)"\s*(?:,\s*swiftSettings[^)]*)?\)', text):
        found.setdefault(m.group(1), set())
    return found


def print_rules(root):
    print(f'pushcast code rules (scripts/tidy.py is their single source; checked over {root / "Sources"})')
    print()
    print(f'function-length: a function is at most {FUNCTION_LIMIT} lines, declaration to closing brace, unless a')
    print(f'  comment in the 3 lines above it says why ("{EXCUSE} {FUNCTION_LIMIT} lines: ...").')
    print()
    print('imports: what each module may import (every module: ' + ', '.join(sorted(ALWAYS)) + ')')
    declared = declared_dependencies(root)
    width = max(len(m) for m in IMPORT_RULES)
    for module, (allowed, why) in IMPORT_RULES.items():
        print(f'  {module:<{width}}  {", ".join(sorted(allowed)) or "(nothing)"}')
        print(f'  {"":<{width}}  {why}')
        extra = declared.get(module, set()) - allowed
        if extra:
            print(f'  {"":<{width}}  Package.swift also lists {", ".join(sorted(extra))}: imports of it are exceptions')
    print('  and one file may import more:')
    for rel, (more, why) in IMPORT_FILES.items():
        print(f'    {rel}  {", ".join(sorted(more))}: {why}')
    print()
    only = ', '.join(sorted(SYSTEM_MODULES))
    print(f'syscalls: only PushcastSystem calls (PushcastReactor: only {", ".join(sorted(REACTOR_CALLS))})')
    print('  ' + ', '.join(n + '(' for n in SYSCALL_FUNCTIONS))
    print('  (bare calls: not `x.open(`, nor a file\'s own `func open(`, `let open =` or `open: () -> T`), and uses')
    print('  ' + ', '.join(SYSCALL_TYPES) + ', Process(')
    print()
    print(f'clock: only {only} reads a clock: ' + ', '.join(name for name, _ in CLOCK_PATTERNS))
    print('  everything else takes a MonotonicClock / WallClock (PushcastCore) from its caller')
    print()
    print('Comments and string literals are not checked. Exceptions (a ratchet: no new ones; a stale one fails):')
    for title, table in (('imports', IMPORT_EXCEPTIONS), ('syscalls', SYSCALL_EXCEPTIONS),
                         ('clock', CLOCK_EXCEPTIONS)):
        print(f'  {title}: {len(table)}')
        for (rel, name), why in sorted(table.items()):
            print(f'    {rel}  {name}: {why}')


# ---------------------------------------------------------------------------------------------
# --self-test

def function_of(lines, name='long'):
    body = [f'    _ = {k}' for k in range(lines - 2)]
    return '\n'.join([f'func {name}() {{'] + body + ['}']) + '\n'


def self_test():
    base = {
        'PushcastCore/Clock.swift': 'public protocol MonotonicClock: AnyObject { func nowNanoseconds() -> UInt64 }\n',
        'PushcastSystem/Files.swift': ('import Glibc\nimport PushcastCore\n'
                                        'public func openFile(_ p: String) -> Int32 { open(p, O_RDONLY) }\n'
                                        'public func now() -> UInt64 { var t = timespec(); clock_gettime(CLOCK_MONOTONIC, &t); return 0 }\n'),
        'PushcastEngine/Clean.swift': (
            'import PushcastCore\nimport PushcastTransport\n'
            '// open(path, O_RDONLY) and Date() in a comment, /* getenv("X") */ in another\n'
            'struct Reader {\n'
            '    func use(reader: Reader, file: Handle, clock: MonotonicClock) {\n'
            '        _ = reader.read(into: buffer)\n'
            '        file.close()\n'
            '        let message = "cannot open(\\(path)): FileManager said \\(Date())"\n'
            '        let raw = #"write(1, "x", 1)"#\n'
            '        let multi = """\n        close(fd) ContinuousClock\n        """\n'
            '        _ = clock.nowNanoseconds()\n'
            '        _ = reopen(x)\n'
            '    }\n'
            '    func write(_ b: [UInt8]) {}\n'
            '    func flush() { write([1]) }\n'
            '    enum Step { case open(Int), close }\n'
            '}\n' + function_of(70, 'seventy')),
    }
    cases = [
        ('a clean tree passes', {}, {}, []),
        ('import PushcastReactor in a new engine file fails', {'PushcastEngine/New.swift': 'import PushcastReactor\n'},
         {}, [('Sources/PushcastEngine/New.swift', 1, 'imports')]),
        ('import Foundation in a new engine file fails', {'PushcastEngine/New.swift': '@preconcurrency import Foundation\n'},
         {}, [('Sources/PushcastEngine/New.swift', 1, 'imports')]),
        ('a provider module imported by the engine fails', {'PushcastEngine/New.swift': 'import PushcastAPNs\n'},
         {}, [('Sources/PushcastEngine/New.swift', 1, 'imports')]),
        ('a provider module importing another provider fails', {'PushcastFCM/New.swift': 'import PushcastAPNs\n'},
         {}, [('Sources/PushcastFCM/New.swift', 1, 'imports')]),
        ('a provider named by a mock file other than MockProviders.swift fails',
         {'PushcastMock/New.swift': 'import PushcastProviderKit\nimport PushcastFCM\n',
          'PushcastMock/MockProviders.swift': 'import PushcastAPNs\nimport PushcastFCM\n'},
         {}, [('Sources/PushcastMock/New.swift', 2, 'imports')]),
        ('an open( call in a new engine file fails', {'PushcastEngine/New.swift': 'let fd = open(path, O_RDONLY)\n'},
         {}, [('Sources/PushcastEngine/New.swift', 1, 'syscalls')]),
        ('an open( call in PushcastReactor fails', {'PushcastReactor/New.swift': 'let fd = open(path, O_RDONLY)\n'},
         {}, [('Sources/PushcastReactor/New.swift', 1, 'syscalls')]),
        ('a socket( call in PushcastReactor passes', {'PushcastReactor/New.swift': 'let fd = socket(AF_INET, 1, 0)\n'}, {}, []),
        ('FileManager in the CLI fails', {'pushcast/New.swift': 'import Foundation\n_ = FileManager.default\n'},
         {}, [('Sources/pushcast/New.swift', 2, 'syscalls')]),
        ('Reactor.nowNanoseconds() in the engine fails', {'PushcastEngine/New.swift': 'let t = Reactor.nowNanoseconds()\n'},
         {}, [('Sources/PushcastEngine/New.swift', 1, 'clock')]),
        ('a 71-line function fails', {'PushcastEngine/New.swift': function_of(71)},
         {}, [('Sources/PushcastEngine/New.swift', 1, 'function-length')]),
        ('a 70-line function passes', {'PushcastEngine/New.swift': function_of(70)}, {}, []),
        ('a 71-line function with a reason passes',
         {'PushcastEngine/New.swift': '// longer than 70 lines: one table\n' + function_of(71)}, {}, []),
        ('a module without a rule fails', {'PushcastNew/A.swift': 'let a = 1\n'},
         {}, [('Sources/PushcastNew/A.swift', 1, 'imports')]),
        ('a listed exception passes', {'PushcastEngine/Old.swift': 'import PushcastReactor\nlet v = getenv("A")\n'},
         {'imports': {('Sources/PushcastEngine/Old.swift', 'PushcastReactor'): 'test'},
          'syscalls': {('Sources/PushcastEngine/Old.swift', 'getenv('): 'test'}}, []),
        ('an exception covers only its own name', {'PushcastEngine/Old.swift': 'import PushcastReactor\nimport Foundation\n'},
         {'imports': {('Sources/PushcastEngine/Old.swift', 'PushcastReactor'): 'test'}},
         [('Sources/PushcastEngine/Old.swift', 2, 'imports')]),
        ('a stale exception fails', {},
         {'imports': {('Sources/PushcastEngine/Clean.swift', 'PushcastReactor'): 'test'},
          'clock': {('Sources/PushcastEngine/Gone.swift', 'Date()'): 'test'}},
         [('scripts/tidy.py', None, 'imports'), ('scripts/tidy.py', None, 'clock')]),
    ]
    failed = 0
    for title, extra, exceptions, expected in cases:
        with tempfile.TemporaryDirectory(prefix='tidy-self-test-') as tmp:
            root = pathlib.Path(tmp)
            for rel, text in {**base, **extra}.items():
                path = root / 'Sources' / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            rules = Rules(import_exceptions=exceptions.get('imports', {}),
                          syscall_exceptions=exceptions.get('syscalls', {}),
                          clock_exceptions=exceptions.get('clock', {}))
            got = check(root, rules)
        key = lambda item: (item[0], item[2], item[1] or 0)
        got_keys = sorted(((rel, line, rule) for rel, line, rule, _ in got), key=key)
        want = sorted(expected, key=key)
        ok = len(got_keys) == len(want) and all(
            g[0] == w[0] and g[2] == w[2] and (w[1] is None or g[1] == w[1]) for g, w in zip(got_keys, want))
        if not ok:
            failed += 1
            print(f'self-test FAILED: {title}: expected {expected}, got:')
            for failure in got:
                print('  ' + format_failure(failure))
        else:
            print(f'self-test ok: {title}')
    print(f'tidy self-test: {len(cases) - failed} of {len(cases)} passed')
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------

def format_failure(failure):
    rel, line, rule, message = failure
    return f'{rel}:{line}: [{rule}] {message}'


def main(argv):
    parser = argparse.ArgumentParser(description='The tidy check of pushcast\'s Sources/ (see the docstring).')
    parser.add_argument('--root', type=pathlib.Path, default=REPO, help='a tree holding Sources/ (default: this repo)')
    parser.add_argument('--limit', type=int, default=FUNCTION_LIMIT, help='function length limit (default 70)')
    parser.add_argument('--only', default=','.join(RULE_NAMES), help='rules to check, comma-separated')
    parser.add_argument('--rules', action='store_true', help='print the rules and their exceptions')
    parser.add_argument('--self-test', action='store_true', help='check the checker on small trees')
    args = parser.parse_args(argv)
    only = tuple(r for r in args.only.split(',') if r)
    unknown = [r for r in only if r not in RULE_NAMES]
    if unknown:
        parser.error(f'unknown rule {", ".join(unknown)} (rules: {", ".join(RULE_NAMES)})')
    if args.rules:
        print_rules(args.root)
        return 0
    if args.self_test:
        return self_test()
    if not (args.root / 'Sources').is_dir():
        parser.error(f'{args.root / "Sources"} is not a directory')
    failures = check(args.root, Rules(limit=args.limit, only=only))
    for failure in failures:
        print(format_failure(failure))
    if failures:
        print(f'tidy: {len(failures)} problem(s); the rules: python3 scripts/tidy.py --rules', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
