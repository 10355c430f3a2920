import CoreMetrics
import DequeModule
import Synchronization

/// The pipeline's own metrics, through swift-metrics with the factory the
/// embedder passes (``Pipeline/init(source:stages:transport:ledger:options:metrics:)``;
/// none by default, and then they cost nothing):
///
/// - `herald_stage_requests_total{stage}`: requests each stage (and the
///   `transport`) was handed;
/// - `herald_stage_decided_total{stage}`: requests a stage ended itself
///   (dropped, suppressed…);
/// - `herald_stage_duration_seconds{stage}`: time per batch in each stage,
///   a timer (a histogram in Prometheus); for the transport, the time to take a
///   batch, which includes waiting for room in its window;
/// - `herald_transport_payload_bytes_total` and `herald_transport_frame_bytes_total`:
///   the bytes of the payloads (and, for the binary interface, the frames)
///   handed to the transport;
/// - `herald_notification_latency_seconds`: a timer from a request's batch
///   entering the pipeline to its outcome, every outcome but those of lines
///   the source could not read.
final class PipelineMetrics: Sendable {
    struct StageInstruments: Sendable {
        let requests: Counter
        let decided: Counter
        let duration: Timer

        func batch(in count: Int, decided: Int, since start: ContinuousClock.Instant) {
            let elapsed = ContinuousClock.now - start
            requests.increment(by: count)
            if decided > 0 { self.decided.increment(by: decided) }
            duration.recordNanoseconds(elapsed.inNanoseconds)
        }
    }

    let factory: any MetricsFactory
    let latency: LatencyTracker
    let payloadBytes: Counter
    let frameBytes: Counter

    init(factory: any MetricsFactory) {
        self.factory = factory
        latency = LatencyTracker(timer: Timer(label: "herald_notification_latency_seconds", factory: factory))
        payloadBytes = Counter(label: "herald_transport_payload_bytes_total", factory: factory)
        frameBytes = Counter(label: "herald_transport_frame_bytes_total", factory: factory)
    }

    /// Counts the bytes of a batch handed to the transport.
    func handed(_ batch: [Envelope]) {
        var payload = 0, frame = 0
        for e in batch {
            payload += e.payload.count
            frame += e.frame?.bytes.count ?? 0
        }
        payloadBytes.increment(by: payload)
        if frame > 0 { frameBytes.increment(by: frame) }
    }

    func stage(_ name: String) -> StageInstruments {
        StageInstruments(
            requests: Counter(label: "herald_stage_requests_total", dimensions: [("stage", name)], factory: factory),
            decided: Counter(label: "herald_stage_decided_total", dimensions: [("stage", name)], factory: factory),
            duration: Timer(label: "herald_stage_duration_seconds", dimensions: [("stage", name)], factory: factory))
    }
}

/// When each batch entered the pipeline, as runs of consecutive sequence
/// numbers (a source numbering by emission makes each batch one run; one that
/// emits lane by lane, several), kept in sequence order, so each outcome's
/// latency can be recorded. Bounded: past `capacity` runs in flight the
/// lowest are forgotten (their outcomes are then not timed).
final class LatencyTracker: OutcomeObserver {
    struct Entry {
        let first: UInt64
        let end: UInt64
        let at: ContinuousClock.Instant
    }
    let entries = Mutex(Deque<Entry>())
    let timer: Timer
    let capacity: Int

    init(timer: Timer, capacity: Int = 65_536) {
        self.timer = timer
        self.capacity = capacity
    }

    /// The batch entered now.
    func entered(_ batch: borrowing [Envelope]) {
        let at = ContinuousClock.now
        var runs: [Entry] = []
        var first = batch[0].sequence, end = first + 1
        for i in 1..<batch.count {
            let q = batch[i].sequence
            if q == end {
                end += 1
            } else {
                runs.append(Entry(first: first, end: end, at: at))
                first = q
                end = q + 1
            }
        }
        runs.append(Entry(first: first, end: end, at: at))
        entries.withLock { d in
            for run in runs {
                // Nearly always after the last (numbered as emitted); else in its place.
                if let last = d.last, last.first > run.first {
                    var lo = 0, hi = d.count
                    while lo < hi {
                        let mid = (lo + hi) / 2
                        if d[mid].first <= run.first { lo = mid + 1 } else { hi = mid }
                    }
                    d.insert(run, at: lo)
                } else {
                    d.append(run)
                }
            }
            while d.count > capacity { d.removeFirst() }
        }
    }

    func observe(_ records: [OutcomeRecord]) {
        let now = ContinuousClock.now
        var times: [Int64] = []
        times.reserveCapacity(records.count)
        entries.withLock { d in
            for r in records {
                // Runs are in sequence order: find the last one starting at or before r.sequence.
                var lo = 0, hi = d.count
                while lo < hi {
                    let mid = (lo + hi) / 2
                    if d[mid].first <= r.sequence { lo = mid + 1 } else { hi = mid }
                }
                guard lo > 0, r.sequence < d[lo - 1].end else { continue }
                let elapsed = now - d[lo - 1].at
                times.append(elapsed.inNanoseconds)
            }
        }
        for t in times { timer.recordNanoseconds(t) }
    }
}
