/// The ledger's outstanding sequence numbers (issue 29): a bitmap over the
/// window from the oldest outstanding sequence on, a bit a sequence, since
/// sources number requests densely and upwards; a set only for a sequence far
/// outside the window (below it, or more than `reach` past its end). Hashing
/// every sequence into a `Set` on entry and again on its outcome was 3% of
/// `herald send`.
struct OutstandingSequences {
    /// Sequence of bit 0 of `words[first]`; always a multiple of 64.
    private var base: UInt64 = 0
    private var words: [UInt64] = []
    /// Words before `first` are all zero (dropped from time to time).
    private var first = 0
    private var others: Set<UInt64> = []
    /// How far past the window's end a sequence may land and still grow the bitmap (in words).
    static let reach = 1 << 14
    private(set) var count = 0

    /// Adds `q`; false if it was outstanding already.
    mutating func insert(_ q: UInt64) -> Bool {
        if words.isEmpty && others.isEmpty { base = q & ~63 }
        guard q >= base else { return note(others.insert(q).inserted) }
        let w = Int(clamping: (q - base) >> 6)
        if w >= words.count {
            guard w - words.count < Self.reach else { return note(others.insert(q).inserted) }
            words.append(contentsOf: repeatElement(0, count: w - words.count + 1))
        }
        let bit: UInt64 = 1 << (q & 63)
        if words[w] & bit != 0 || (!others.isEmpty && others.contains(q)) { return false }
        words[w] |= bit
        count += 1
        return true
    }

    /// Removes `q`; false if it was not outstanding.
    mutating func remove(_ q: UInt64) -> Bool {
        let w = q >= base ? Int(clamping: (q - base) >> 6) : -1
        guard w >= first && w < words.count else {
            guard others.remove(q) != nil else { return false }
            count -= 1
            return true
        }
        let bit: UInt64 = 1 << (q & 63)
        guard words[w] & bit != 0 else {
            // Set aside when it was out of the window's reach, which has grown since.
            guard !others.isEmpty, others.remove(q) != nil else { return false }
            count -= 1
            return true
        }
        words[w] &= ~bit
        count -= 1
        if w == first { compact() }
        return true
    }

    private mutating func note(_ inserted: Bool) -> Bool {
        if inserted { count += 1 }
        return inserted
    }

    /// Moves `first` past empty words; drops them once they are half the array.
    private mutating func compact() {
        while first < words.count && words[first] == 0 { first += 1 }
        if first == words.count {
            base += UInt64(words.count) << 6
            words.removeAll(keepingCapacity: true)
            first = 0
        } else if first >= 1024 && first * 2 >= words.count {
            words.removeFirst(first)
            base += UInt64(first) << 6
            first = 0
        }
    }
}
