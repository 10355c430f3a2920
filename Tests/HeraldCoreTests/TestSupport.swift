import HeraldCore
import Synchronization

/// A token whose bytes are all `seed`.
func token(_ seed: UInt8) -> DeviceToken { DeviceToken(bytes: [UInt8](repeating: seed, count: 32)) }

/// A request with a body-only alert and the given id.
func request(_ id: UInt32, alert: String = "hi") -> NotificationRequest {
    var aps = APS()
    aps.alert = Alert(body: alert)
    return NotificationRequest(token: token(UInt8(truncatingIfNeeded: id)), aps: aps, id: id)
}

/// A transport that records the ids it sees, in order, and accepts everything.
final class RecordingTransport: Transport {
    let seen = Mutex<[UInt32]>([])
    let finished = Atomic<Bool>(false)
    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        seen.withLock { $0.append(contentsOf: batch.map { $0.request.id! }) }
        outcomes.record(batch.map { $0.record(.accepted) })
    }
    func finish(outcomes: OutcomeLedger) async { finished.store(true, ordering: .relaxed) }
    var ids: [UInt32] { seen.withLock { $0 } }
}

/// A transport that holds every batch until released, then accepts.
final class GatedTransport: Transport {
    let gate = Gate()
    let received = Atomic<Int>(0)
    func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        await gate.wait()
        received.add(batch.count, ordering: .relaxed)
        outcomes.record(batch.map { $0.record(.accepted) })
    }
    func finish(outcomes: OutcomeLedger) async {}
}

/// A one-shot gate: `wait` suspends until `open`.
actor Gate {
    var isOpen = false
    var waiters: [CheckedContinuation<Void, Never>] = []
    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
    func open() {
        isOpen = true
        for w in waiters { w.resume() }
        waiters.removeAll()
    }
}

/// A source that emits requests forever (until asked to stop), counting them.
struct EndlessSource: NotificationSource {
    let emitted = Counter()
    func produce(into sink: SourceSink) async throws {
        var i: UInt32 = 0
        while !sink.isStopping {
            await sink.emit(request(i))
            emitted.increment()
            i &+= 1
        }
    }
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
    func increment() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}

/// Polls `condition` every millisecond for up to `seconds` (long by default:
/// the parallel run's first minute can keep a task from the pool that long).
func eventually(seconds: Double = 300, _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return await condition()
}
