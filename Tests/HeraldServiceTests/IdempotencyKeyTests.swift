import HeraldCore
import Testing

@testable import HeraldService

@Suite("Idempotency-Key in memory: the header, and the keys' state machine over a clock moved by hand")
struct IdempotencyKeyTests {
    static let t0 = ContinuousClock.now

    static func key(_ k: String, _ body: String = "[1]") throws -> IdempotencyKey {
        try #require(try IdempotencyKey(header: k, body: Array(body.utf8)))
    }

    @Test("the header: bare or in double quotes (the key inside), 1 to 255 visible ASCII characters; the fingerprint is the body's SHA-256")
    func header() throws {
        #expect(try IdempotencyKey(header: nil, body: []) == nil)
        #expect(try Self.key("abc").key == "abc")
        #expect(try Self.key("\"8e03978e-40d5\"").key == "8e03978e-40d5")
        #expect(try Self.key("\"").key == "\"")
        #expect(try Self.key(String(repeating: "k", count: 255)).key.count == 255)
        for bad in ["", "a b", "tab\t", "é", String(repeating: "k", count: 256)] {
            #expect(throws: IdempotencyKeyError.self, "\(bad.debugDescription)") { try IdempotencyKey(header: bad, body: []) }
        }
        // SHA-256 of "abc" (FIPS 180-2's example).
        #expect(try Self.key("k", "abc").fingerprint == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(try Self.key("k", "[1]") != Self.key("k", "[2]"))
    }

    @Test("new, then in progress until finished, then the same ids; another body: conflict; a refused batch releases the key")
    func lifecycle() throws {
        let keys = IdempotencyKeys(window: .seconds(3600), capacity: 10)
        let a = try Self.key("a"), other = try Self.key("a", "[2]")
        #expect(keys.begin(a, now: Self.t0) == .new)
        #expect(keys.begin(a, now: Self.t0) == .inProgress)
        #expect(keys.begin(other, now: Self.t0) == .conflict)
        keys.finish(a, ids: 7..<9)
        #expect(keys.begin(a, now: Self.t0 + .seconds(5)) == .replay(7..<9))
        #expect(keys.begin(other, now: Self.t0 + .seconds(5)) == .conflict)
        let b = try Self.key("b")
        #expect(keys.begin(b, now: Self.t0) == .new)
        keys.release(b)
        #expect(keys.begin(b, now: Self.t0) == .new, "a refused batch's key is free for the retry")
        // A release for another body does not free a finished key.
        keys.release(other)
        #expect(keys.begin(a, now: Self.t0) == .replay(7..<9))
    }

    @Test("past the window a key is new again; over capacity the oldest keys go first; a reused key's old place does not evict its new entry")
    func windowAndCapacity() throws {
        let keys = IdempotencyKeys(window: .seconds(60), capacity: 3)
        for (n, k) in ["a", "b", "c"].enumerated() {
            #expect(keys.begin(try Self.key(k), now: Self.t0 + .seconds(n)) == .new)
            keys.finish(try Self.key(k), ids: UInt64(n)..<UInt64(n + 1))
        }
        #expect(keys.begin(try Self.key("a"), now: Self.t0 + .seconds(59)) == .replay(0..<1))
        #expect(keys.begin(try Self.key("a"), now: Self.t0 + .seconds(60)) == .new, "a's window has passed")
        keys.finish(try Self.key("a"), ids: 10..<11)
        // a is now the newest; d pushes out b, the oldest (a's old place is skipped).
        #expect(keys.begin(try Self.key("d"), now: Self.t0 + .seconds(61)) == .new)
        #expect(keys.counts.kept == 3)
        #expect(keys.begin(try Self.key("b", "[9]"), now: Self.t0 + .seconds(61)) == .new, "b was forgotten (another body is no conflict)")
        #expect(keys.begin(try Self.key("a"), now: Self.t0 + .seconds(62)) == .replay(10..<11))
        #expect(keys.counts.kept <= 3 && keys.counts.evicted >= 1)
    }
}
