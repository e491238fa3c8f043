import PushcastCore

/// A stretch of the scratch file holding one shard's lines sorted by row.
struct SortedRun {
    var offset: Int
    var bytes: Int
    var shard: Int
}

extension ShardMerge {
    /// Cuts one shard's results file into chunks of whole lines, sorts each by row and appends
    /// it to `scratch` as a run. A CSV header is skipped; a torn last line (a crash mid-write) is
    /// dropped with a note; a damaged line stops the merge, naming it.
    static func sortIntoRuns(path: String, shard: Int, format: ResultsFormat, files: any FileStorage, scratch: any ScratchStorage, runs: inout [SortedRun],
                             note: (String) -> Void) throws {
        let file = try files.openForReading(path)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkBytes, alignment: 8)
        let sorted = UnsafeMutableRawBufferPointer.allocate(byteCount: runWriteBytes, alignment: 8)
        defer { chunk.deallocate(); sorted.deallocate() }
        var keys: [UInt64] = []
        var spans: [(start: Int, length: Int)] = []
        var filled = 0, line = 0, eof = false
        while !eof {
            while filled < chunk.count {
                let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: chunk[filled...]))
                if n == 0 { eof = true; break }
                filled += n
            }
            keys.removeAll(keepingCapacity: true)
            spans.removeAll(keepingCapacity: true)
            let used = try splitLines(chunk, filled: filled, path: path, format: format, line: &line, keys: &keys, spans: &spans)
            guard used > 0 || eof else { throw CampaignError.input("\(path):\(line + 1): a line longer than \(chunkBytes >> 20) MiB") }
            keys.sort()
            if !keys.isEmpty {
                let offset = scratch.size
                try writeRun(keys: keys, spans: spans, chunk: chunk, through: sorted, to: scratch)
                runs.append(SortedRun(offset: offset, bytes: scratch.size - offset, shard: shard))
            }
            let rest = filled - used
            if eof && rest > 0 { note("shard \(shard): \(path): a torn last line of \(rest) bytes dropped (the run was killed mid-write)") }
            if rest > 0 && used > 0 { RawMemory.move(to: chunk.baseAddress!, from: chunk.baseAddress! + used, count: rest) }
            filled = rest
        }
    }

    /// Appends a chunk's lines to `scratch` in key order, through a small buffer.
    private static func writeRun(keys: [UInt64], spans: [(start: Int, length: Int)], chunk: UnsafeMutableRawBufferPointer,
                                 through buffer: UnsafeMutableRawBufferPointer, to scratch: any ScratchStorage) throws {
        var used = 0
        for key in keys {
            let span = spans[Int(key & 0xFF_FFFF)]
            if used + span.length > buffer.count {
                try scratch.append(UnsafeRawBufferPointer(rebasing: buffer[0..<used]))
                used = 0
            }
            if span.length > buffer.count {
                try scratch.append(UnsafeRawBufferPointer(start: chunk.baseAddress! + span.start, count: span.length))
                continue
            }
            (buffer.baseAddress! + used).copyMemory(from: chunk.baseAddress! + span.start, byteCount: span.length)
            used += span.length
        }
        if used > 0 { try scratch.append(UnsafeRawBufferPointer(rebasing: buffer[0..<used])) }
    }

    /// Finds the whole lines in `chunk[0..<filled]`: each one's sort key (row << 24 | index) and
    /// span. Returns the bytes they take (a partial last line stays for the next chunk).
    private static func splitLines(_ chunk: UnsafeMutableRawBufferPointer, filled: Int, path: String, format: ResultsFormat,
                                   line: inout Int, keys: inout [UInt64], spans: inout [(start: Int, length: Int)]) throws -> Int {
        var start = 0
        let base = chunk.baseAddress!
        while start < filled, let found = RawMemory.find(0x0A, in: base + start, count: filled - start) {
            let end = base.distance(to: found) + 1
            line += 1
            let bytes = UnsafeRawBufferPointer(start: base + start, count: end - start)
            if let row = resultLineRow(bytes, format: format) {
                keys.append(UInt64(row) << 24 | UInt64(spans.count))
                spans.append((start, end - start))
            } else if !(format == .csv && line == 1) {
                throw CampaignError.input("\(path):\(line): damaged results line (it does not start with its row number)")
            }
            start = end
        }
        return start
    }

    /// Merges the sorted runs into the results file, in row order, through the ledger.
    static func mergeRuns(_ runs: [SortedRun], scratch: any ScratchStorage, format: ResultsFormat, columns: ResultColumns, out path: String,
                          files: any FileStorage, ledger: inout MergeLedger) throws {
        let out = try files.createForAppending(path, bufferBytes: 1 << 20)
        if format == .csv { try out.append(columns.csvHeader) }
        let bufferBytes = min(1 << 20, max(64 << 10, mergeBufferBudget / max(1, runs.count)))
        let readers = runs.map { RunReader(run: $0, scratch: scratch, bufferBytes: bufferBytes) }
        defer { for reader in readers { reader.release() } }
        var heap = RowHeap(capacity: readers.count)
        for (index, reader) in readers.enumerated() where try reader.advance() { heap.push(row: reader.row, run: index) }
        while let (row, index) = heap.pop() {
            let reader = readers[index]
            if ledger.take(row: row, shard: reader.run.shard) { try out.append(reader.line) }
            if try reader.advance() { heap.push(row: reader.row, run: index) }
        }
        ledger.finish()
        try out.flush()
    }

    /// One prune file from the shards' (each one's header dropped); a missing one is named.
    static func concatenatePrunes(_ paths: [String], out path: String, files: any FileStorage, report: inout MergeReport) throws {
        let out = try files.createForAppending(path, bufferBytes: 1 << 20)
        try out.append(ResultEncoding.pruneHeader)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 8)
        defer { buffer.deallocate() }
        for (k, prune) in paths.enumerated() {
            guard files.exists(prune) else {
                report.incomplete.append("shard \(k): its prune file \(prune) is missing")
                continue
            }
            let file = try files.openForReading(prune)
            var header = true
            while true {
                let n = try file.read(into: buffer)
                if n == 0 { break }
                var skip = 0
                if header, let nl = RawMemory.find(0x0A, in: buffer.baseAddress!, count: n) {
                    skip = buffer.baseAddress!.distance(to: nl) + 1
                    header = false
                } else if header {
                    continue
                }
                try out.append(UnsafeRawBufferPointer(rebasing: buffer[skip..<n]))
            }
        }
        try out.flush()
    }

    /// The shards' summaries added up (counts summed, latency histograms merged), written as one.
    static func mergeSummaries(_ paths: [String], request: MergeRequest, rows: Int, fingerprint: String, claims: [ShardClaim?],
                               out: String?, report: inout MergeReport) throws(CampaignError) {
        var merged = CampaignSummary()
        for (k, path) in paths.enumerated() {
            let bytes: [UInt8]?
            do { bytes = try request.files.readWholeFile(path) } catch { throw .input("\(error)") }
            guard let bytes, let summary = CampaignSummary.parse(bytes, catalog: request.catalog) else {
                report.incomplete.append("shard \(k): its summary \(path) is " + (request.files.exists(path) ? "not a pushcast summary" : "missing"))
                continue
            }
            if summary.interrupted || summary.stoppedBecause != nil {
                report.incomplete.append("shard \(k) stopped early (\(summary.stoppedBecause ?? "interrupted")): "
                    + "run it again with the same command line and --resume")
            }
            merged.merge(summary)
        }
        merged.identity = CampaignIdentity(shard: nil, mergedShards: paths.count, campaign: claims.compactMap { $0?.campaign }.first ?? "",
                                           input: fingerprint, inputRows: rows)
        merged.resultsPath = request.resultsOut
        merged.prunePath = request.pruneOut ?? ""
        report.summary = merged
        guard let out else { return }
        do {
            let file = try request.files.createForAppending(out)
            try file.append(merged.json)
            try file.flush()
        } catch {
            throw .output("\(error)")
        }
    }
}

/// Reads one sorted run line by line through a buffer of its own.
final class RunReader {
    let run: SortedRun
    private let scratch: any ScratchStorage
    private var buffer: UnsafeMutableRawBufferPointer
    private var consumed = 0      // run bytes read into the buffer so far
    private var start = 0         // the current line's start in the buffer
    private var length = 0
    private var filled = 0
    private(set) var row = 0

    init(run: SortedRun, scratch: any ScratchStorage, bufferBytes: Int) {
        self.run = run
        self.scratch = scratch
        buffer = .allocate(byteCount: bufferBytes, alignment: 8)
    }

    func release() { buffer.deallocate() }

    /// The current line, newline included; valid until the next `advance`.
    var line: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[start..<(start + length)]) }

    /// Moves to the next line: false at the end of the run.
    func advance() throws -> Bool {
        start += length
        length = 0
        while true {
            if start < filled, let found = RawMemory.find(0x0A, in: buffer.baseAddress! + start, count: filled - start) {
                length = (buffer.baseAddress! + start).distance(to: found) + 1
                row = Int(UnsafeRawBufferPointer(rebasing: buffer[start..<(start + length)]).rowNumber)
                return true
            }
            guard consumed < run.bytes else { return false }
            try refill()
        }
    }

    private func refill() throws {
        let rest = filled - start
        if rest > 0 && start > 0 { RawMemory.move(to: buffer.baseAddress!, from: buffer.baseAddress! + start, count: rest) }
        if rest == buffer.count {
            // A line longer than the buffer: double it.
            let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 8)
            grown.baseAddress!.copyMemory(from: buffer.baseAddress!, byteCount: rest)
            buffer.deallocate()
            buffer = grown
        }
        start = 0
        filled = rest
        let wanted = min(buffer.count - filled, run.bytes - consumed)
        let n = try scratch.read(at: run.offset + consumed, into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<(filled + wanted)]))
        precondition(n == wanted, "short read of a scratch file")
        consumed += n
        filled += n
    }
}

extension UnsafeRawBufferPointer {
    /// The row of a line already checked by `resultLineRow`: its first digits (after `{"row":`).
    var rowNumber: Int {
        var i = self[0] == 0x7B ? 7 : 0
        var row = 0
        while i < count, self[i] >= 0x30, self[i] <= 0x39 {
            row = row * 10 + Int(self[i] - 0x30)
            i += 1
        }
        return row
    }
}

/// A binary min-heap of (row, run) packed into one word: row << 24 | run (runs < 16 Mi).
struct RowHeap {
    private var items: [UInt64] = []

    init(capacity: Int) {
        precondition(capacity < 1 << 24, "too many runs")
        items.reserveCapacity(capacity)
    }

    mutating func push(row: Int, run: Int) {
        items.append(UInt64(row) << 24 | UInt64(run))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (row: Int, run: Int)? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                guard left < items.count else { break }
                let smaller = left + 1 < items.count && items[left + 1] < items[left] ? left + 1 : left
                guard items[smaller] < items[parent] else { break }
                items.swapAt(smaller, parent)
                parent = smaller
            }
        }
        return (Int(top >> 24), Int(top & 0xFF_FFFF))
    }
}
