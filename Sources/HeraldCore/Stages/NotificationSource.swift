import Synchronization

/// Where requests come from: a file, standard input, a queue, memory.
///
/// A source pushes requests into the ``SourceSink`` it is given, and returns
/// when it has no more or when ``SourceSink/isStopping`` turns true (graceful
/// shutdown: what was emitted still drains through the pipeline). `emit`
/// suspends while the pipeline is full, so a source never runs ahead of the
/// transport. Input that cannot become a request is reported with
/// `emitInvalid`, so that it, too, ends in an outcome.
public protocol NotificationSource: Sendable {
    func produce(into sink: SourceSink) async throws
    /// What an envelope's `line` counts, as outcome lines name it: `line` (a line of a file, the
    /// default) or `row` (a queue's row id).
    var lineKey: StaticString { get }
}

extension NotificationSource {
    public var lineKey: StaticString { "line" }
}

/// Collects a source's requests into batches and hands them to the pipeline.
public final class SourceSink {
    package let batchSize: Int
    let output: BoundedChannel<[Envelope]>
    let ledger: OutcomeLedger
    @usableFromInline let stop: StopSignal
    var pending: [Envelope] = []
    var nextSequence: UInt64 = 0
    let latency: LatencyTracker?
    /// Storage of batches the pipeline is done with: a source building batches on other
    /// threads for ``emit(prepared:)`` takes their arrays from here.
    package let pool: BatchPool
    /// Threads the source may decode its input on (the pipeline's
    /// ``PipelineOptions/threads``, resolved): a source that parses text
    /// (``JSONLinesSource``) decodes that many chunks at once and emits them
    /// in input order. At least 1.
    public let threads: Int

    init(
        batchSize: Int, output: BoundedChannel<[Envelope]>, ledger: OutcomeLedger, stop: StopSignal, latency: LatencyTracker? = nil,
        pool: BatchPool = BatchPool(capacity: 0), threads: Int = 1
    ) {
        self.threads = max(1, threads)
        self.latency = latency
        self.pool = pool
        self.batchSize = batchSize
        self.output = output
        self.ledger = ledger
        self.stop = stop
        pending.reserveCapacity(batchSize)
    }

    /// True once shutdown was requested: stop reading and return.
    @inlinable public var isStopping: Bool { stop.isSet }

    /// Number of requests emitted so far (valid and invalid).
    public var emitted: UInt64 { nextSequence }

    /// Emits one request. Suspends while the pipeline is full.
    /// (Inlinable, and synchronous until a batch is full: called once per
    /// request, it costs the caller no async frame of its own.)
    @inlinable nonisolated(nonsending) public func emit(_ request: consuming NotificationRequest, line: Int? = nil) async {
        if append(request, line: line) { await flush() }
    }

    /// Adds a request to the batch being filled (building its envelope in
    /// place); true when the batch is full.
    @usableFromInline func append(_ request: consuming NotificationRequest, line: Int?) -> Bool {
        pending.append(Envelope(sequence: nextSequence, line: line, request: request))
        nextSequence += 1
        return pending.count >= batchSize
    }

    /// Builds the next request in place, in the batch being filled (`fill` as for
    /// `[Envelope].append(sequence:line:building:)`). When `fill` returns false the envelope
    /// is taken back, unnumbered, and this returns nil; else whether the batch is full (then
    /// ``flush()``).
    package func append(line: Int?, building fill: (inout NotificationRequest) -> Bool) -> Bool? {
        guard pending.append(sequence: nextSequence, line: line, building: fill) else { return nil }
        nextSequence += 1
        return pending.count >= batchSize
    }

    /// Emits one request under a number its source gave it (``RequestQueue`` numbers requests as
    /// they are queued, and emits them lane by lane): numbers must be unique within the run, and
    /// a source emits either this way or the other, never both.
    @inlinable nonisolated(nonsending) package func emit(_ request: consuming NotificationRequest, sequence: UInt64, line: Int? = nil) async {
        if append(request, sequence: sequence, line: line) { await flush() }
    }

    /// ``append(_:line:)`` under a number the source gave.
    @usableFromInline func append(_ request: consuming NotificationRequest, sequence: UInt64, line: Int?) -> Bool {
        pending.append(Envelope(sequence: sequence, line: line, request: request))
        return pending.count >= batchSize
    }

    /// Reports input that could not become a request: it ends as `dropped`
    /// with `reason`, which the runtime prefixes with where it was (`line 7: `,
    /// or `row 7: ` with `lineKey` "row").
    nonisolated(nonsending) public func emitInvalid(line: Int?, reason: String, id: UInt32? = nil, token: DeviceToken? = nil, lineKey: StaticString = "line") async {
        await flush()
        let sequence = nextSequence
        nextSequence += 1
        ledger.enter(CollectionOfOne(sequence), count: 1)
        let where_ = line.map { "\(lineKey) \($0): " } ?? ""
        ledger.record(OutcomeRecord(sequence: sequence, line: line, id: id, token: token, outcome: .dropped(OutcomeReason(.invalidRequest, where_ + reason))))
    }

    /// Ends a decoded request without sending it: `dropped` with `reason`, under `sequence` (a
    /// number the source gave, as ``emit(_:sequence:line:)`` takes) or the next one.
    nonisolated(nonsending) package func emitDropped(_ request: NotificationRequest, sequence: UInt64? = nil, line: Int? = nil, reason: OutcomeReason) async {
        await flush()
        let number: UInt64
        if let sequence {
            number = sequence
        } else {
            number = nextSequence
            nextSequence += 1
        }
        ledger.enter(CollectionOfOne(number), count: 1)
        ledger.record(Envelope(sequence: number, line: line, request: request).record(.dropped(reason)))
    }

    /// Emits envelopes a source built on another thread (``JSONLinesSource``
    /// decodes chunks of lines in parallel): each is numbered where it lies
    /// (whatever `sequence` it had is overwritten). A run of at most a batch,
    /// with nothing pending, goes on as it is, a batch of its own, with no
    /// copy (a source decoding a batch's worth of lines at a time hands on
    /// full batches, and after a line that is not a request, one shorter
    /// batch); longer runs, or runs behind pending requests, are cut into
    /// batches as ``emit(_:line:)`` forms them.
    nonisolated(nonsending) public func emit(prepared envelopes: consuming [Envelope]) async {
        var envelopes = envelopes
        guard !envelopes.isEmpty else { return }
        for i in envelopes.indices {
            envelopes[i].sequence = nextSequence
            nextSequence += 1
        }
        if pending.isEmpty && envelopes.count <= batchSize { return await send(envelopes) }
        var start = 0
        if !pending.isEmpty {
            start = min(batchSize - pending.count, envelopes.count)
            pending.append(contentsOf: envelopes[0..<start])
            if pending.count >= batchSize { await flush() }
        }
        while envelopes.count - start >= batchSize {
            await send(Array(envelopes[start..<start + batchSize]))
            start += batchSize
        }
        if start < envelopes.count { pending.append(contentsOf: envelopes[start...]) }
    }

    /// An empty array to build a batch in, with the storage of a batch the
    /// pipeline is done with when one is free.
    func batchStorage() -> [Envelope] {
        var batch = pool.take()
        batch.reserveCapacity(batchSize)
        return batch
    }

    /// Hands the partial batch to the pipeline.
    nonisolated(nonsending) public func flush() async {
        guard !pending.isEmpty else { return }
        var batch = batchStorage()
        swap(&batch, &pending)
        await send(batch)
    }

    /// Enters a numbered batch in the ledger and hands it to the first stage.
    nonisolated(nonsending) func send(_ batch: consuming [Envelope]) async {
        let batch = batch
        ledger.enter(batch.lazy.map(\.sequence), count: batch.count)
        latency?.entered(batch)
        ledger.traceBook?.entered(batch)
        // Outcomes the observers have not caught up with are bounded: a slow observer slows the source.
        await ledger.waitForObserverRoom()
        // Consumed, so the first stage owns the batch alone and mutates it in place.
        await output.send(consume batch)
    }
}

/// A one-way flag that asks sources to stop.
public final class StopSignal: Sendable {
    @usableFromInline let flag = Atomic<Bool>(false)
    public init() {}
    public func set() { flag.store(true, ordering: .releasing) }
    @inlinable public var isSet: Bool { flag.load(ordering: .acquiring) }
}

/// A source over any sequence of requests held in memory.
public struct InMemorySource: NotificationSource {
    public let requests: [NotificationRequest]
    public init(_ requests: [NotificationRequest]) { self.requests = requests }
    public func produce(into sink: SourceSink) async throws {
        for r in requests {
            if sink.isStopping { return }
            await sink.emit(r)
        }
    }
}

/// A source over an `AsyncSequence` of requests (a queue, a stream of events).
public struct AsyncSequenceSource<S: AsyncSequence & Sendable>: NotificationSource where S.Element == NotificationRequest {
    public let sequence: S
    public init(_ sequence: S) { self.sequence = sequence }
    public func produce(into sink: SourceSink) async throws {
        for try await r in sequence {
            await sink.emit(r)
            if sink.isStopping { return }
        }
    }
}
