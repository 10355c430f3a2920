import Testing

@testable import HeraldCore

/// Pacing (issue 30), the sans-I/O machine over simulated time: a rate for the transport (a
/// token bucket) and a least interval per device token, with collapse by `collapse-id`.
@Suite("Pacer: per-token intervals, the transport's rate, collapse; nothing lost")
struct PacerTests {
    static let origin = ContinuousClock.now

    static func envelope(_ n: Int, token: UInt8, collapse: String? = nil) -> Envelope {
        var r = NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: token, count: 32)), aps: APS(), id: UInt32(n))
        r.collapseID = collapse
        return Envelope(sequence: UInt64(n), request: r)
    }

    /// Runs `offers` (at their times) through a pacer, releasing whenever it asks; each envelope's
    /// send time, and the collapsed ones.
    static func run(_ rules: Pacer.Rules, _ offers: [(at: Duration, batch: [Envelope])]) -> (sent: [(UInt64, Duration)], collapsed: [UInt64], pacer: Pacer) {
        var pacer = Pacer(rules: rules)
        var sent: [(UInt64, Duration)] = [], collapsed: [UInt64] = []
        var next: Duration? = nil
        var i = 0
        while i < offers.count || next != nil {
            let offerFirst = i < offers.count && (next == nil || offers[i].at <= next!)
            let now = offerFirst ? offers[i].at : next!
            let out: Pacer.Output
            if offerFirst {
                out = pacer.offer(offers[i].batch, now: origin + now)
                i += 1
                if next == nil, pacer.held > 0 { next = now }
            } else {
                let r = pacer.release(now: origin + now)
                out = r.out
                next = r.next.map { $0 - origin }
            }
            sent += out.send.map { ($0.sequence, now) }
            collapsed += out.collapsed.map(\.sequence)
        }
        return (sent, collapsed, pacer)
    }

    @Test("one token limited to 1/s: 100 notifications to it in one second go out one a second, in order, none lost; another token's are not held")
    func perTokenOneASecond() {
        let offers = (0..<100).map { n in (at: Duration.milliseconds(n * 10), batch: [Self.envelope(n, token: 1), Self.envelope(1000 + n, token: UInt8(2 + n % 50))]) }
        let (sent, collapsed, pacer) = Self.run(Pacer.Rules(perToken: .seconds(1)), offers)
        let one = sent.filter { $0.0 < 1000 }
        #expect(one.map(\.0) == Array(0..<100) && collapsed.isEmpty && pacer.held == 0)
        for (a, b) in zip(one, one.dropFirst()) { #expect(b.1 - a.1 >= .seconds(1), "\(a) \(b)") }
        #expect(one.last!.1 >= .seconds(99) && one.last!.1 < .seconds(100))
        // The other tokens get one notification every 10 ms each among 50: two each a second apart at most.
        let others = sent.filter { $0.0 >= 1000 }
        #expect(others.count == 100 && pacer.heldForToken == 99 + 50)
    }

    @Test("with collapse: 100 notifications to one token with one collapse-id in a second: the first now, the last a second later, the 98 between collapsed (recorded, not lost)")
    func collapse() {
        let offers = (0..<100).map { n in (at: Duration.milliseconds(n * 10), batch: [Self.envelope(n, token: 1, collapse: "score")]) }
        let (sent, collapsed, _) = Self.run(Pacer.Rules(perToken: .seconds(1), collapse: true), offers)
        #expect(sent.map(\.0) == [0, 99] && sent[1].1 == .seconds(1))
        #expect(collapsed == Array(1...98))
        // Without a collapse-id nothing collapses.
        let plain = Self.run(Pacer.Rules(perToken: .seconds(1), collapse: true), (0..<5).map { (.zero, [Self.envelope($0, token: 1)]) })
        #expect(plain.sent.count == 5 && plain.collapsed.isEmpty)
    }

    @Test("the transport's rate, 100/s with a burst of 10: 1,000 at once go out 10 at once then 100 a second, in order")
    func rate() {
        let (sent, _, _) = Self.run(Pacer.Rules(perSecond: 100, burst: 10), [(.zero, (0..<1000).map { Self.envelope($0, token: UInt8($0 % 200)) })])
        #expect(sent.map(\.0) == (0..<1000).map(UInt64.init))
        #expect(sent.prefix(10).allSatisfy { $0.1 == .zero })
        for (k, s) in sent.enumerated() { #expect(Double(k + 1) <= 10 + 100 * (Double(s.1.components.seconds) + Double(s.1.components.attoseconds) / 1e18) + 1e-6) }
        #expect(sent.last!.1 >= .milliseconds(9_890) && sent.last!.1 <= .milliseconds(9_910), "\(sent.last!)")
    }

    @Test("random offers over a few tokens with both limits and collapse (200 seeds): every notification sent or collapsed once, each token's at least its interval apart and in order (without collapse), the rate never exceeded")
    func againstTheRules() {
        for seed in 1...200 as ClosedRange<UInt64> {
            var random = SeededGenerator(seed: seed)
            let rules = Pacer.Rules(perSecond: Double(Int.random(in: 5...50, using: &random)), burst: Int.random(in: 1...5, using: &random),
                                    perToken: .milliseconds(Int.random(in: 50...400, using: &random)), collapse: Bool.random(using: &random))
            var offers: [(at: Duration, batch: [Envelope])] = []
            var n = 0, t = 0
            for _ in 0..<Int.random(in: 1...40, using: &random) {
                t += Int.random(in: 0...200, using: &random)
                offers.append((.milliseconds(t), (0..<Int.random(in: 1...8, using: &random)).map { _ in
                    defer { n += 1 }
                    return Self.envelope(n, token: UInt8.random(in: 1...4, using: &random), collapse: Bool.random(using: &random) ? "c\(Int.random(in: 0...2, using: &random))" : nil)
                }))
            }
            let (sent, collapsed, pacer) = Self.run(rules, offers)
            let all = (sent.map(\.0) + collapsed).sorted()
            #expect(all == (0..<n).map(UInt64.init) && pacer.held == 0, "seed \(seed)")
            let tokenOf = Dictionary(uniqueKeysWithValues: offers.flatMap(\.batch).map { ($0.sequence, $0.request.token) })
            var last: [DeviceToken: (UInt64, Duration)] = [:]
            for (s, at) in sent {
                if let (p, pat) = last[tokenOf[s]!] {
                    // With collapse a newer notification takes the place of the one it replaces, ahead of
                    // those queued after that one: order holds without it.
                    #expect((rules.collapse || p < s) && at - pat >= rules.perToken!, "seed \(seed): \(p)@\(pat) then \(s)@\(at)")
                }
                last[tokenOf[s]!] = (s, at)
            }
            let seconds = sent.map { Double($0.1.components.seconds) + Double($0.1.components.attoseconds) / 1e18 }
            for (k, s) in seconds.enumerated() {
                // In any span from an earlier send to this one: at most burst + rate × span (+1 for the bounds).
                for j in stride(from: k, through: 0, by: -1) where s - seconds[j] < 2 {
                    #expect(Double(k - j + 1) <= Double(rules.burst) + rules.perSecond! * (s - seconds[j]) + 1e-6, "seed \(seed)")
                }
            }
        }
    }
}
