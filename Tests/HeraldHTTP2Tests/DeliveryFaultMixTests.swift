import Crypto
import Foundation
import HeraldCore
import Testing

@testable import HeraldHTTP2

/// A fake APNs in virtual time, written for these tests: checks every JWT,
/// announces one stream until a valid token arrives, and injects seeded faults
/// (GOAWAY, 503, 429, resets after or before processing, lost answers, refused
/// connections). It counts what it delivered, so duplicates are measured.
struct FakeAPNs {
    var random: SeededGenerator
    let publicKey: P256.Signing.PublicKey
    let bad: Set<UInt64>
    let dead: Set<UInt64>
    var delivered: [UInt64: Int] = [:]
    var tokensSeen: Set<String> = []
    var maxStreams: [Int: Int] = [:]
    var open: [Int: Int] = [:]
    var goingAway: Set<Int> = []
    var closed: Set<Int> = []
    var streamsOver = 0

    /// One decision for a request: when, and what the machine is told.
    enum Reply { case answer(APNsResponse), failed(unprocessed: Bool), silence }

    func valid(_ authorization: String?) -> Bool {
        guard let jwt = authorization?.dropFirst(7) else { return false }
        let parts = jwt.split(separator: ".")
        guard parts.count == 3, let sig = Base64URL.decode(parts[2]),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: sig)
        else { return false }
        return publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8))
    }

    mutating func reply(to item: HTTP2Item, authorization: String?, connection c: Int) -> Reply {
        guard valid(authorization) else { return .answer(APNsResponse(status: 403, reason: "InvalidProviderToken")) }
        tokensSeen.insert(String(authorization!))
        if goingAway.contains(c) { return .failed(unprocessed: true) }
        let valid = !bad.contains(item.sequence) && !dead.contains(item.sequence)
        let roll = Double.random(in: 0..<1, using: &random)
        switch roll {
        case ..<0.01: return .answer(APNsResponse(status: 503, reason: "ServiceUnavailable"))
        case ..<0.015: return .answer(APNsResponse(status: 429, reason: "TooManyRequests"))
        case ..<0.02: return .answer(APNsResponse(status: 500, reason: "InternalServerError"))
        case ..<0.025:
            if Bool.random(using: &random) && valid { delivered[item.sequence, default: 0] += 1 }  // processed, then reset
            return .failed(unprocessed: false)
        case ..<0.028:
            if valid { delivered[item.sequence, default: 0] += 1 }
            return .silence  // the answer is lost: the request times out
        default: break
        }
        if bad.contains(item.sequence) { return .answer(APNsResponse(status: 400, apnsID: item.request.apnsID, reason: "BadDeviceToken")) }
        if dead.contains(item.sequence) {
            return .answer(APNsResponse(status: 410, apnsID: item.request.apnsID, reason: "Unregistered", timestamp: 1_699_999_000_000 + Int64(item.sequence)))
        }
        delivered[item.sequence, default: 0] += 1
        return .answer(APNsResponse(status: 200, apnsID: item.request.apnsID))
    }
}

/// Runs the machine against the fake in virtual time until everything is settled.
struct VirtualRun {
    enum Event { case connected(Int), refused(Int), reply(Int, FakeAPNs.Reply), goAway(Int), settings(Int, Int), pong(Int) }
    var machine: HTTP2DeliveryMachine
    var fake: FakeAPNs
    var now = Duration.seconds(1_700_000_000)
    var events: [(at: Duration, seq: Int, event: Event)] = []
    var eventCount = 0
    var sentOn: [Int: Int] = [:]
    var cancelled: Set<Int> = []
    var outcomes: [OutcomeRecord] = []
    var dead: [(DeviceToken, Int64?)] = []

    mutating func schedule(_ e: Event, after d: Duration) {
        eventCount += 1
        events.append((now + d, eventCount, e))
    }

    mutating func perform() {
        for a in machine.takeActions() {
            switch a {
            case .connect(let c):
                if Double.random(in: 0..<1, using: &fake.random) < 0.05 { schedule(.refused(c), after: .milliseconds(3)) } else {
                    fake.maxStreams[c] = 1
                    schedule(.connected(c), after: .milliseconds(2))
                }
            case .send(let c, let stream, let request, let auth):
                sentOn[stream] = c
                fake.open[c, default: 0] += 1
                if fake.open[c]! > fake.maxStreams[c, default: 1] { fake.streamsOver += 1 }
                let item = HTTP2Item(sequence: UInt64(request.path.hashValue & 0) + UInt64(request.apnsID.suffix(8), radix: 16)!, line: nil, id: nil, token: DeviceToken(bytes: [1]), request: request)
                let reply = fake.reply(to: item, authorization: auth, connection: c)
                if fake.maxStreams[c] == 1, case .answer(let r) = reply, r.status != 403 { schedule(.settings(c, 50), after: .milliseconds(1)) }
                if Double.random(in: 0..<1, using: &fake.random) < 0.004 && !fake.goingAway.contains(c) {
                    fake.goingAway.insert(c)  // from now on APNs processes nothing new on c
                    schedule(.goAway(c), after: .microseconds(500))
                }
                schedule(.reply(stream, reply), after: .microseconds(Int64.random(in: 200...3000, using: &fake.random)))
            case .cancel(let stream): cancelled.insert(stream)
            case .ping(let c): schedule(.pong(c), after: .milliseconds(1))
            case .close(let c): fake.closed.insert(c)
            }
        }
        outcomes += machine.takeOutcomes()
        dead += machine.takeDeadTokens()
    }

    mutating func run(limit: Int = 200_000) {
        perform()
        var steps = 0
        while steps < limit {
            steps += 1
            let nextEvent = events.indices.min { (events[$0].at, events[$0].seq) < (events[$1].at, events[$1].seq) }
            let deadline = machine.nextDeadline
            if let i = nextEvent, deadline.map({ events[i].at <= $0 }) ?? true {
                let (at, _, e) = events.remove(at: i)
                now = max(now, at)
                deliver(e)
            } else if let deadline {
                now = max(now, deadline)
                machine.timer(now: now)
            } else {
                break
            }
            perform()
            if machine.isSettled && events.isEmpty { break }
        }
    }

    mutating func deliver(_ e: Event) {
        switch e {
        case .connected(let c): if !fake.closed.contains(c) { machine.connected(c, maxStreams: 1, now: now) }
        case .refused(let c): machine.closed(c, reason: .transient("refused"), now: now)
        case .settings(let c, let n):
            guard !fake.closed.contains(c) else { return }
            fake.maxStreams[c] = n
            machine.settingsChanged(c, maxStreams: n, now: now)
        case .goAway(let c):
            guard !fake.closed.contains(c) else { return }
            machine.goAway(c, reason: "Shutdown", now: now)
        case .pong(let c): machine.pong(c, now: now)
        case .reply(let stream, let reply):
            let c = sentOn[stream]!
            fake.open[c, default: 1] -= 1
            guard !cancelled.contains(stream), !fake.closed.contains(c) else { return }
            switch reply {
            case .answer(let r): machine.answered(stream, r, now: now)
            case .failed(let unprocessed): machine.streamFailed(stream, unprocessed: unprocessed, reason: "reset", now: now)
            case .silence: break
            }
        }
    }
}

@Suite("HTTP/2 delivery machine under seeded fault mixes")
struct HTTP2DeliveryFaultMixTests {
    @Test("every request ends once; valid ones accepted; 400s and 410s rejected; duplicates only after unanswered resets; one JWT", arguments: 0..<100)
    func faultMix(seed: Int) throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = try ProviderTokenKey(pem: privateKey.pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
        var random = SeededGenerator(seed: UInt64(seed))
        let count = 400 + Int.random(in: 0...400, using: &random)
        var bad = Set<UInt64>(), dead = Set<UInt64>()
        for i in 0..<UInt64(count) {
            let r = Double.random(in: 0..<1, using: &random)
            if r < 0.01 { bad.insert(i) } else if r < 0.015 { dead.insert(i) }
        }
        var policy = HTTP2DeliveryPolicy()
        policy.connections = 1 + seed % 3
        policy.requestTimeout = .milliseconds(50)
        policy.maxAttempts = 8
        policy.backoff = BackoffPolicy(initial: .milliseconds(1), maximum: .milliseconds(20))
        policy.retryLaterDelay = .milliseconds(5)
        let items = (0..<UInt64(count)).map { i in
            let id = String(format: "00000000-0000-4000-8000-%012x", i)
            let request = APNsRequest(path: "/3/device/00", headers: [], body: [1], pushType: .alert, apnsID: id)
            return HTTP2Item(sequence: i, line: nil, id: UInt32(i), token: DeviceToken(bytes: [UInt8(truncatingIfNeeded: i), 7]), request: request)
        }
        var run = VirtualRun(
            machine: HTTP2DeliveryMachine(policy: policy, tokens: ProviderTokens(key: key), seed: UInt64(seed)),
            fake: FakeAPNs(random: SeededGenerator(seed: UInt64(seed) &+ 99), publicKey: privateKey.publicKey, bad: bad, dead: dead))
        run.machine.enqueue(items, now: run.now)
        run.run()

        #expect(run.machine.isSettled == true, "settled")
        let bySequence = Dictionary(grouping: run.outcomes, by: \.sequence)
        #expect(bySequence.count == count && run.outcomes.count == count, "one outcome per request")
        for (seq, records) in bySequence {
            let o = records[0].outcome
            if bad.contains(seq) {
                #expect(o == .rejected(Status(http: 400, reason: "BadDeviceToken")), "\(seq): \(o)")
            } else if dead.contains(seq) {
                #expect(o == .rejected(Status(http: 410, reason: "Unregistered")), "\(seq): \(o)")
            } else {
                #expect(o == .accepted, "\(seq): \(o)")
            }
            #expect(records[0].apnsID == items[Int(seq)].request.apnsID)
        }
        let duplicates = run.fake.delivered.values.reduce(0) { $0 + max(0, $1 - 1) }
        #expect(duplicates <= run.machine.statistics.resentUnanswered, "duplicates only after unanswered sends")
        #expect(run.fake.delivered.keys.allSatisfy { !bad.contains($0) && !dead.contains($0) })
        #expect(run.dead.count == dead.count && run.dead.allSatisfy { $0.1 != nil })
        #expect(run.machine.tokens?.signed == 1 && run.fake.tokensSeen.count == 1, "exactly one JWT for the run")
        #expect(run.fake.streamsOver == 0, "never more streams than the connection allows")
    }

    @Test("a refused credential fails what is left once, with the reason, and sends nothing more")
    func credentialRefused() throws {
        let key = try ProviderTokenKey(pem: P256.Signing.PrivateKey().pemRepresentation, keyID: "KEY1234567", teamID: "TEAM123456")
        let otherKey = P256.Signing.PrivateKey().publicKey  // the fake trusts another key
        let items = (0..<50).map { i in
            HTTP2Item(sequence: UInt64(i), line: nil, id: nil, token: DeviceToken(bytes: [1]),
                      request: APNsRequest(path: "/3/device/01", headers: [], body: [1], pushType: .alert, apnsID: String(format: "00000000-0000-4000-8000-%012x", i)))
        }
        var run = VirtualRun(
            machine: HTTP2DeliveryMachine(tokens: ProviderTokens(key: key)),
            fake: FakeAPNs(random: SeededGenerator(seed: 1), publicKey: otherKey, bad: [], dead: []))
        run.machine.enqueue(items, now: run.now)
        run.run()
        #expect(run.outcomes.count == 50)
        #expect(run.machine.statistics.streams == 1, "one request learns the credential is refused; the rest are not sent")
        #expect(run.outcomes.allSatisfy { if case .failed(let r) = $0.outcome { return r.code == .credentialRejected && r.message.contains("InvalidProviderToken") } else { return false } })
    }
}
