import HeraldBinary
import HeraldCore
import HeraldSimulator
import PropertyBased
import Testing

@Suite struct PropertyTests {
    @Test func anErrorResponsePartitionsTheWindowInOrder() async {
        await propertyCheck(count: 500, input: Gen.int(in: 0...200), Gen.int(in: 0...260), Gen.uint8(), Gen.uint32()) { n, k, code, first in
            var w = InFlightWindow<Int>(firstIdentifier: first)
            for i in 0..<n { #expect(w.append(i) == first &+ UInt32(i)) }
            let status = Status(rawValue: code)
            let r = w.resolve(ErrorResponse(status: status, identifier: first &+ UInt32(k)))
            let rejected = r.rejected.map { [$0.item] } ?? []
            // Nothing lost, nothing twice, order kept.
            #expect(r.accepted + rejected + r.resend == Array(0..<n))
            #expect(w.isEmpty)
            if k < n {
                #expect(r.identifierMatched)
                if status == .shutdown || status == .noErrors {
                    #expect(r.accepted.count == k + 1 && r.rejected == nil)
                } else {
                    #expect(r.accepted.count == k && r.rejected?.item == k && r.rejected?.status == status)
                }
            } else {
                #expect(!r.identifierMatched && r.resend.count == n)
            }
        }
    }

    @Test func anyStreamDecodesTheSameHoweverItIsCut() async {
        await propertyCheck(count: 200, input: Gen.uint64(), Gen.int(in: 1...300)) { (seed: UInt64, maxChunk: Int) throws in
            var g = SeededGenerator(seed: seed)
            var expected: [DecodedNotification] = []
            var stream: [UInt8] = []
            for _ in 0..<Int(g.next() % 12) {
                let format = NotificationFormat.all[Int(g.next() % 3)]
                let payload = (0..<Int(g.next() % 400)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
                let t = (0..<Int(g.next() % 34)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
                let n = DecodedNotification(
                    format: format, token: t, payload: payload,
                    identifier: format == .simple ? nil : UInt32(truncatingIfNeeded: g.next()),
                    expiry: format == .simple ? nil : UInt32(truncatingIfNeeded: g.next()),
                    priority: format == .frame ? (g.next() % 2 == 0 ? 5 : 10) : nil)
                expected.append(n)
                stream += encode(format, token: DeviceToken(bytes: t), payload: payload, id: n.identifier ?? 0, expiry: n.expiry ?? 0, priority: n.priority ?? 10)
            }
            var chunks: [[UInt8]] = []
            var i = 0
            while i < stream.count {
                let n = min(stream.count - i, 1 + Int(g.next() % UInt64(maxChunk)))
                chunks.append(Array(stream[i..<i + n]))
                i += n
            }
            #expect(try decodeAll(NotificationParser.self, chunks: chunks) == expected)
            #expect(try readAll(NotificationParser.self, chunks: chunks) == expected)
        }
    }

    @Test func theGatewayAcceptsExactlyTheValidPrefix() async {
        // Any mix of good and bad notifications: the gateway accepts those before the
        // first bad one, in order, and names the first bad one.
        await propertyCheck(count: 200, input: Gen.int(in: 0...30), Gen.int(in: 0...40), Gen.int(in: 0...5)) { good, badAt, kind in
            let sim = APNsSimulator()
            sim.markInvalid(token(99))
            let badFrames: [[UInt8]] = [
                encode(.frame, token: token(0, count: 31), payload: bytes(#"{"aps":{}}"#), id: 1_000),
                encode(.frame, payload: [], id: 1_000),
                encode(.frame, payload: bytes(#"{"aps":1}"#), id: 1_000),
                encode(.frame, token: token(99), payload: bytes(#"{"aps":{}}"#), id: 1_000),
                encode(.frame, payload: bytes(#"{"aps":{"content-available":1}}"#), id: 1_000, priority: 10),
                encode(.frame, payload: bytes("{\"aps\":{},\"x\":\"" + String(repeating: "y", count: 2100) + "\"}"), id: 1_000),
            ]
            let statuses: [UInt8] = [5, 4, 1, 8, 1, 7]
            var stream: [UInt8] = []
            for i in 0..<good {
                if i == badAt { stream += badFrames[kind] }
                stream += encode(.frame, token: token(UInt8(i)), payload: bytes("{\"aps\":{\"badge\":\(i)}}"), id: UInt32(i))
            }
            let reply = sim.openConnection().receive(stream)
            let accepted = sim.deliveries.map { $0.identifier! }
            if badAt < good {
                #expect(reply.closed && reply.response == [8, statuses[kind], 0, 0, 0x03, 0xE8])
                #expect(accepted == (0..<UInt32(badAt)).map { $0 })
            } else {
                #expect(!reply.closed && reply.response.isEmpty)
                #expect(accepted == (0..<UInt32(good)).map { $0 })
            }
        }
    }
}
