import HeraldBinary
import HeraldCore
import HeraldSimulator
import Testing

@Suite struct DecoderTests {
    /// Three notifications, one per format, back to back.
    static let notifications: [DecodedNotification] = [
        DecodedNotification(format: .simple, token: token(1).bytes, payload: bytes(#"{"aps":{"alert":"one"}}"#)),
        DecodedNotification(format: .enhanced, token: token(2).bytes, payload: bytes(#"{"aps":{"badge":2}}"#), identifier: 0xFFFF_FFFF, expiry: 1_700_000_000),
        DecodedNotification(format: .frame, token: token(3).bytes, payload: bytes(#"{"aps":{"sound":"x"}}"#), identifier: 3, expiry: 0, priority: 5),
    ]

    static func wire(_ n: DecodedNotification) -> [UInt8] {
        encode(n.format, token: DeviceToken(bytes: n.token!), payload: n.payload!, id: n.identifier ?? 0, expiry: n.expiry ?? 0, priority: n.priority ?? 10)
    }

    static let stream: [UInt8] = notifications.flatMap(wire)

    @Test func manyPerBuffer() throws {
        #expect(try decodeAll(NotificationParser.self, chunks: [Self.stream]) == Self.notifications)
        #expect(try readAll(NotificationParser.self, chunks: [Self.stream]) == Self.notifications)
    }

    @Test func splitAtEveryByte() throws {
        let s = Self.stream
        for i in 0...s.count {
            let chunks = [Array(s[..<i]), Array(s[i...])]
            #expect(try decodeAll(NotificationParser.self, chunks: chunks) == Self.notifications, "split at \(i)")
            #expect(try readAll(NotificationParser.self, chunks: chunks) == Self.notifications, "split at \(i)")
        }
        // And one byte at a time.
        let single = s.map { [$0] }
        #expect(try decodeAll(NotificationParser.self, chunks: single) == Self.notifications)
        #expect(try readAll(NotificationParser.self, chunks: single) == Self.notifications)
    }

    @Test func randomSplitsOfRandomStreams() throws {
        var g = SeededGenerator(seed: 42)
        for _ in 0..<200 {
            var expected: [DecodedNotification] = []
            var s: [UInt8] = []
            for _ in 0..<Int(g.next() % 20) {
                let format = NotificationFormat.all[Int(g.next() % 3)]
                let payload = [UInt8](repeating: UInt8(ascii: "a") + UInt8(g.next() % 26), count: Int(g.next() % 300))
                let t = [UInt8](repeating: UInt8(truncatingIfNeeded: g.next()), count: Int(g.next() % 40))
                let n = DecodedNotification(
                    format: format, token: t, payload: payload,
                    identifier: format == .simple ? nil : UInt32(truncatingIfNeeded: g.next()),
                    expiry: format == .simple ? nil : UInt32(truncatingIfNeeded: g.next()),
                    priority: format == .frame ? (g.next() % 2 == 0 ? 5 : 10) : nil)
                expected.append(n)
                s += Self.wire(n)
            }
            var chunks: [[UInt8]] = []
            var i = 0
            while i < s.count {
                let n = min(s.count - i, 1 + Int(g.next() % 97))
                chunks.append(Array(s[i..<i + n]))
                i += n
            }
            #expect(try decodeAll(NotificationParser.self, chunks: chunks) == expected)
            #expect(try readAll(NotificationParser.self, chunks: chunks) == expected)
        }
    }

    @Test func framesMayOmitItemsAndOrderThemFreely() throws {
        let f = rawFrame([(5, [10]), (3, be32(77)), (2, bytes("{}"))])
        let n = try decodeAll(NotificationParser.self, chunks: [f])
        #expect(n == [DecodedNotification(format: .frame, token: nil, payload: bytes("{}"), identifier: 77, expiry: nil, priority: 10)])
        #expect(try decodeAll(NotificationParser.self, chunks: [rawFrame([])]) == [DecodedNotification(format: .frame, token: nil, payload: nil)])
    }

    static func failure<P: BinaryMessageParser>(_ p: P.Type, _ chunks: [[UInt8]]) -> BinaryDecodingError? {
        do {
            _ = try decodeAll(p, chunks: chunks)
            return nil
        } catch {
            return error
        }
    }

    @Test func garbage() {
        let good = encode(.enhanced, id: 5)
        // Unknown command, after a good notification: the offset is the bad byte's.
        var e = Self.failure(NotificationParser.self, [good + [7, 0, 0]])
        #expect(e?.code == .unknownCommand && e?.offset == good.count && e?.command == 7)
        // Error responses and feedback are not notifications.
        #expect(Self.failure(NotificationParser.self, [ErrorResponse(status: .invalidToken, identifier: 1).bytes])?.code == .unknownCommand)
        // A frame longer than five maximal items.
        e = Self.failure(NotificationParser.self, [[2, 0, 5, 0, 11]])  // 327,691: one over the maximum
        #expect(e?.code == .impossibleLength)
        e = Self.failure(NotificationParser.self, [[2, 0xFF, 0xFF, 0xFF, 0xFF]])
        #expect(e?.code == .impossibleLength)
        // An item running past its frame; an item header cut by the frame's end.
        #expect(Self.failure(NotificationParser.self, [rawFrame([(2, bytes("{}"))], lengthAdjust: -1)])?.code == .impossibleLength)
        #expect(Self.failure(NotificationParser.self, [rawFrame([(2, bytes("{}"))]) + [0]].map { var b = $0; b[4] += 1; return b })?.code == .impossibleLength)
        // Unknown, duplicate and wrong-sized items; the identifier read before the fault is reported.
        e = Self.failure(NotificationParser.self, [rawFrame([(3, be32(9)), (9, [1])])])
        #expect(e?.code == .unknownItem && e?.identifier == 9 && e?.offset == 5 + 7)
        #expect(Self.failure(NotificationParser.self, [rawFrame([(5, [10]), (5, [5])])])?.code == .duplicateItem)
        #expect(Self.failure(NotificationParser.self, [rawFrame([(3, [0, 0, 1])])])?.code == .invalidItemLength)
        #expect(Self.failure(NotificationParser.self, [rawFrame([(4, [0, 0, 0, 0, 1])])])?.code == .invalidItemLength)
        #expect(Self.failure(NotificationParser.self, [rawFrame([(5, [0, 10])])])?.code == .invalidItemLength)
        // Truncated at the end of the stream, at every cut of a good stream.
        let s = Self.stream
        for cut in 1..<s.count {
            let boundaries = Set(Self.notifications.indices.map { k in Self.notifications[...k].map(Self.wire).map(\.count).reduce(0, +) })
            if boundaries.contains(cut) { continue }
            let e = Self.failure(NotificationParser.self, [Array(s[..<cut])])
            #expect(e?.code == .truncated, "cut at \(cut)")
        }
    }

    @Test func failedDecoderStaysFailed() {
        var d = NotificationDecoder()
        d.feed([9, 1, 2])
        #expect(throws: BinaryDecodingError.self) { _ = try d.next() }
        d.feed(encode(.simple))
        #expect(throws: BinaryDecodingError.self) { _ = try d.next() }
        #expect(throws: BinaryDecodingError.self) { try d.read(encode(.simple)) { _ in true } }
        #expect(d.error?.code == .unknownCommand)
    }

    @Test func announcedLengthsAreNotAllocatedBeforeTheBytesArrive() throws {
        // A frame announcing 327,690 bytes (the maximum) holds only what arrived.
        var d = NotificationDecoder()
        let max = UInt32(NotificationViewParser.maximumFrameDataLength)
        d.feed([2] + be32(max))
        guard case .needMoreData = try d.next() else { Issue.record("expected needMoreData"); return }
        #expect(d.bufferedByteCount == 5)
        var v = NotificationViewDecoder()
        try v.read([2] + be32(max) + [1, 0]) { _ in true }
        #expect(v.bufferedByteCount == 7)
    }

    @Test func feedThenReadThenNextMix() throws {
        let s = Self.stream
        for cut in [0, 1, 40, s.count / 2, s.count - 3, s.count] {
            var d = NotificationDecoder()
            var out: [DecodedNotification] = []
            // Everything up to `cut` fed and not yet decoded, then the rest read; then a second round via next.
            d.feed(Array(s[..<cut]))
            try d.read(Array(s[cut...])) { out.append($0); return true }
            d.feed(s)
            while case .message(let m) = try d.next() { out.append(m) }
            try d.read(s) { out.append($0); return true }
            try d.finish()
            #expect(out == Self.notifications + Self.notifications + Self.notifications, "cut at \(cut)")
        }
    }

    @Test func readStopsWhenTheBodySaysSo() throws {
        var d = NotificationViewDecoder()
        var seen = 0
        let more = try d.read(Self.stream) { _ in seen += 1; return seen < 2 }
        #expect(!more && seen == 2)
    }

    // MARK: error responses

    @Test(arguments: [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 255, 9, 42, 128] as [UInt8])
    func errorResponseEveryStatus(code: UInt8) throws {
        let r = ErrorResponse(status: Status(rawValue: code), identifier: 0x0102_0304)
        #expect(r.bytes == [8, code, 1, 2, 3, 4])
        let decoded = try decodeAll(ErrorResponseParser.self, chunks: [r.bytes])
        #expect(decoded == [r])
        #expect(decoded[0].status.byte == code)
    }

    @Test func errorResponsesSplitAndBatched() throws {
        let rs = (0..<5).map { ErrorResponse(status: Status(rawValue: UInt8($0 * 50)), identifier: UInt32($0) &* 0x0101_0101) }
        let s = rs.flatMap(\.bytes)
        for i in 0...s.count {
            #expect(try decodeAll(ErrorResponseParser.self, chunks: [Array(s[..<i]), Array(s[i...])]) == rs)
            #expect(try readAll(ErrorResponseParser.self, chunks: [Array(s[..<i]), Array(s[i...])]) == rs)
        }
        #expect(Self.failure(ErrorResponseParser.self, [[8, 1, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0]])?.code == .unknownCommand)
        #expect(Self.failure(ErrorResponseParser.self, [[8, 1, 0, 0]])?.code == .truncated)
        #expect(Status.shutdown.rawValue == 10 && Status.unknown.rawValue == 255)
        #expect(Status(rawValue: 42).description == "unknown status 42")
    }

    // MARK: feedback

    @Test func feedbackTuples() throws {
        let entries = (0..<4).map { FeedbackEntry(token: token(UInt8($0)), timestamp: 1_700_000_000 + UInt32($0)) }
        let s = FeedbackTuple.bytes(entries)
        #expect(hex(Array(s[0..<38])) == "6553f100" + "0020" + tokenHex)
        for i in 0...s.count {
            #expect(try decodeAll(FeedbackParser.self, chunks: [Array(s[..<i]), Array(s[i...])]) == entries)
            #expect(try readAll(FeedbackParser.self, chunks: [Array(s[..<i]), Array(s[i...])]) == entries)
        }
        #expect(Self.failure(FeedbackParser.self, [be32(1) + [0, 0]])?.code == .impossibleLength)
        #expect(Self.failure(FeedbackParser.self, [Array(s.dropLast())])?.code == .truncated)
    }
}
