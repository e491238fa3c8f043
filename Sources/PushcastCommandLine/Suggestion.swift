/// "Did you mean" for a mistyped option or command name.
enum Suggestion {
    /// The candidate nearest to `typed`, or nil when none is close enough.
    ///
    /// Close enough means an edit distance (insertions, deletions, substitutions and swaps of
    /// neighbours) of at most a third of the typed length, and at least 1; failing that, the
    /// single candidate that `typed` (two characters or more) is a prefix of. Ties go to the
    /// candidate declared first.
    static func nearest(to typed: String, among candidates: [String]) -> String? {
        let allowed = max(1, typed.count / 3)
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(typed, candidate)
            if distance <= allowed, distance < (best?.distance ?? Int.max) {
                best = (candidate, distance)
            }
        }
        if let best { return best.name }
        let extensions = candidates.filter { typed.count >= 2 && $0.hasPrefix(typed) }
        return extensions.count == 1 ? extensions[0] : nil
    }

    /// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of one
    /// substring): `conections` -> `connections` is 1, `stremas` -> `streams` is 1.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        let width = b.count + 1
        var rows = [[Int]](repeating: [Int](repeating: 0, count: width), count: a.count + 1)
        for j in 0...b.count { rows[0][j] = j }
        for i in 1...a.count {
            rows[i][0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    value = min(value, rows[i - 2][j - 2] + 1)
                }
                rows[i][j] = value
            }
        }
        return rows[a.count][b.count]
    }
}
