import Synchronization
import CoreMetrics

/// A stage with the name configuration and errors refer to it by.
public struct NamedStage: Sendable {
    public var name: String
    public var stage: any PipelineStage
    /// Whether a traced notification gets a span for this stage (`herald.` and its name, its
    /// time on the notification's batch). True unless said otherwise: Herald's own checks that
    /// look up or copy in memory (the suppression at ingest, the size guard, framing) say false,
    /// their time is inside the notification's `herald.send` span, and each span is bytes every
    /// traced notification sends to the collector.
    public var traced: Bool
    public init(_ name: String, _ stage: any PipelineStage, traced: Bool = true) {
        self.name = name
        self.stage = stage
        self.traced = traced
    }
}

extension NamedStage {
    /// Whether the stage may run on several batches at once (``ConcurrentStage``).
    public var isConcurrent: Bool { stage is any ConcurrentStage }

    /// ``run(_:)``, noting the stage's time in `book` for the batch's traced requests (a stage
    /// that makes no span: none).
    func run(_ batch: inout [Envelope], noting book: TraceBook?) async {
        guard traced, let book, !book.isEmpty else { return await run(&batch) }
        let start = Duration.sinceEpochNanoseconds
        await run(&batch)
        book.ran(name, batch, from: start, to: Duration.sinceEpochNanoseconds)
    }

    /// Runs the stage over a batch; if it throws, every undecided envelope of
    /// the batch fails, naming the stage.
    public func run(_ batch: inout [Envelope]) async {
        do {
            try await stage.process(&batch)
        } catch {
            for i in batch.indices where batch[i].outcome == nil {
                batch[i].outcome = .failed(OutcomeReason(.internalFailure, "stage \(name): \(error)"))
            }
        }
    }
}

/// Sizes of the runtime's batches and buffers.
public struct PipelineOptions: Sendable, Hashable {
    /// Requests per batch handed between stages. A source hands on what it has when it
    /// waits for more, so a lone request never waits for a batch to fill. 1,024: on two
    /// cores, `herald send` spent a fifth more CPU with batches of 256 (a thread parked and
    /// woken, a hand-over, a batch's allocations, four times as often).
    public var batchSize: Int = 1024
    /// Batches each inter-stage buffer holds before the upstream stage waits.
    public var bufferedBatches: Int = 4
    /// Outcomes decided and not yet seen by the ledger's observers (which a
    /// task of their own calls, off the transport's event loop) before the
    /// source and the transport wait for them: memory stays bounded whatever
    /// an observer's pace.
    public var observerBacklog: Int = 16_384
    /// Cores the pipeline spreads over: a source may decode on that many
    /// threads (``SourceSink/threads``), and each run of ``ConcurrentStage``s
    /// works on twice that many batches at once. 0, the default, is every
    /// core the process may run on (its CPU affinity: `taskset -c 0` gives 1);
    /// 1 decodes on the source's own task and runs one actor a stage.
    public var threads: Int = 0
    public init(batchSize: Int = 1024, bufferedBatches: Int = 4, observerBacklog: Int = 16_384, threads: Int = 0) {
        self.batchSize = batchSize
        self.bufferedBatches = bufferedBatches
        self.observerBacklog = observerBacklog
        self.threads = threads
    }

    /// ``threads`` with 0 resolved to the cores available.
    public var effectiveThreads: Int { threads > 0 ? threads : Cores.available }
}

/// A second signal: why the pipeline gave up, and the stage runners' tasks,
/// cancelled once it does so a stage that waits (``RateLimitStage``'s sleep,
/// a custom stage's `Task.sleep`) stops waiting.
final class Abandonment: Sendable {
    struct State {
        var reason: String?
        var tasks: [Task<Void, Never>] = []
    }
    let flag = Atomic<Bool>(false)
    let state = Mutex(State())

    /// The reason, once abandoned; cheap to ask per batch.
    var reason: String? {
        guard flag.load(ordering: .acquiring) else { return nil }
        return state.withLock { $0.reason }
    }

    /// Keeps the stage tasks to cancel; cancels them at once if already abandoned.
    func register(_ tasks: [Task<Void, Never>]) {
        let late = state.withLock { s in
            s.tasks = tasks
            return s.reason != nil
        }
        if late { for t in tasks { t.cancel() } }
    }

    /// Records the first reason and cancels the stage tasks.
    func abandon(_ reason: String) {
        let tasks = state.withLock { s in
            if s.reason == nil { s.reason = reason }
            return s.tasks
        }
        flag.store(true, ordering: .releasing)
        for t in tasks { t.cancel() }
    }
}

/// Hosts one stage: the stage runs isolated to this actor, one batch at a time.
actor StageRunner {
    let named: NamedStage
    let instruments: PipelineMetrics.StageInstruments?
    let abandonment: Abandonment
    init(_ named: NamedStage, metrics: PipelineMetrics?, abandonment: Abandonment) {
        self.named = named
        self.abandonment = abandonment
        instruments = metrics?.stage(named.name)
    }

    func run(input: BoundedChannel<[Envelope]>, output: BoundedChannel<[Envelope]>, ledger: OutcomeLedger) async {
        while var batch = await input.receive() {
            if let reason = abandonment.reason {
                // Abandoned: the stage is skipped and the batch ends here, so
                // a backlog behind a slow stage ends at once, not at its pace.
                Self.fail(&batch, reason, ledger: ledger)
                continue
            }
            if let instruments {
                let start = ContinuousClock.now, count = batch.count
                await named.run(&batch, noting: ledger.traceBook)
                Pipeline.settleDecided(&batch, ledger: ledger)
                instruments.batch(in: count, decided: count - batch.count, since: start)
            } else {
                await named.run(&batch, noting: ledger.traceBook)
                Pipeline.settleDecided(&batch, ledger: ledger)
            }
            // Abandoned while the stage ran (a cut-short wait): what it did not decide ends here too.
            if let reason = abandonment.reason {
                Self.fail(&batch, reason, ledger: ledger)
                continue
            }
            if !batch.isEmpty { await output.send(consume batch) }
        }
        output.close()
    }

    static func fail(_ batch: inout [Envelope], _ reason: String, ledger: OutcomeLedger) {
        markAbandoned(&batch, reason)
        Pipeline.settleDecided(&batch, ledger: ledger)
    }

    /// Fails every undecided envelope of `batch` with `reason` (code `abandoned`), unrecorded.
    static func markAbandoned(_ batch: inout [Envelope], _ reason: String) {
        for i in batch.indices where batch[i].outcome == nil {
            batch[i].outcome = .failed(OutcomeReason(.abandoned, reason))
        }
    }
}

/// Runs a row of ``ConcurrentStage``s (issue 29): each batch through every
/// stage of the row in a task of its own, up to `window` batches at once, and
/// the batches passed on in the order they came, so the transport sees
/// requests in source order as with one actor a stage. What a stage decided
/// is recorded when its batch's turn comes (in batch order), and a batch's
/// decided envelopes stay in it until then: the stages after skip them, as
/// every stage must skip an envelope that has an outcome.
final class ConcurrentRowRunner: Sendable {
    let stages: [NamedStage]
    let instruments: [PipelineMetrics.StageInstruments?]
    let abandonment: Abandonment
    let window: Int

    init(_ stages: [NamedStage], window: Int, metrics: PipelineMetrics?, abandonment: Abandonment) {
        self.stages = stages
        self.window = max(1, window)
        self.abandonment = abandonment
        instruments = stages.map { metrics?.stage($0.name) }
    }

    func run(input: BoundedChannel<[Envelope]>, output: BoundedChannel<[Envelope]>, ledger: OutcomeLedger) async {
        // The batches being worked on, oldest first: a task of its own hands each on when done
        // (not the receiving loop, which may be waiting for the next batch: a lone request
        // must not wait for a later one to come before it goes on).
        // At most `window` at once: those buffered, the one the forwarder awaits, and the one
        // whose send waits for room (its task already started).
        let ordered = BoundedChannel<Task<[Envelope], Never>>(capacity: max(1, window - 2))
        let forwarder = Task {
            // The task is let go before its batch goes on: a finished task keeps its result, and
            // a batch shared with it would be copied by the next write to it.
            func next() async -> [Envelope]? {
                guard let task = await ordered.receive() else { return nil }
                return await task.value
            }
            while var batch = await next() {
                Pipeline.settleDecided(&batch, ledger: ledger)
                if !batch.isEmpty { await output.send(consume batch) }
            }
            output.close()
        }
        let stages = self.stages, instruments = self.instruments, abandonment = self.abandonment, book = ledger.traceBook
        while let batch = await input.receive() {
            let handoff = Handoff(consume batch)
            _ = await ordered.send(Task { await Self.process(handoff.take(), stages: stages, instruments: instruments, abandonment: abandonment, book: book) })
        }
        ordered.close()
        await forwarder.value
    }

    /// One batch through the row; abandoned (a second signal), what is undecided fails with the reason.
    static func process(
        _ batch: consuming [Envelope], stages: [NamedStage], instruments: [PipelineMetrics.StageInstruments?], abandonment: Abandonment,
        book: TraceBook? = nil
    ) async -> [Envelope] {
        var batch = batch
        for (k, named) in stages.enumerated() {
            if abandonment.reason != nil { break }
            if let instrument = instruments[k] {
                let start = ContinuousClock.now, undecided = batch.count { $0.outcome == nil }
                await named.run(&batch, noting: book)
                instrument.batch(in: undecided, decided: undecided - batch.count { $0.outcome == nil }, since: start)
            } else {
                await named.run(&batch, noting: book)
            }
        }
        if let reason = abandonment.reason { StageRunner.markAbandoned(&batch, reason) }
        return batch
    }
}

/// Hosts the transport at the end of the pipeline.
actor TransportRunner {
    let transport: any Transport
    let metrics: PipelineMetrics?
    let instruments: PipelineMetrics.StageInstruments?
    init(_ transport: any Transport, metrics: PipelineMetrics?) {
        self.transport = transport
        self.metrics = metrics
        instruments = metrics?.stage("transport")
    }

    /// `releaseApart`: each sent batch is emptied (its envelopes released) on a task of its own, not
    /// on this one: with several threads, freeing a million envelopes one after another on the
    /// transport's one task was half of what held `herald send` back on 16 cores.
    func run(input: BoundedChannel<[Envelope]>, ledger: OutcomeLedger, recycle: BatchPool, releaseApart: Bool = false) async {
        while let batch = await input.receive() {
            await ledger.waitForObserverRoom()
            metrics?.handed(batch)
            if let book = ledger.traceBook, !book.isEmpty { book.handed(batch) }
            let start = instruments == nil ? nil : ContinuousClock.now
            do {
                try await transport.send(batch, outcomes: ledger)
            } catch {
                // The transport refused the batch outright: none of it was sent.
                ledger.record(batch, as: .failed(OutcomeReason(.internalFailure, "transport: \(error)")))
            }
            if let start { instruments?.batch(in: batch.count, decided: 0, since: start) }
            if releaseApart {
                let handoff = Handoff(consume batch)
                Task { recycle.put(handoff.take()) }
            } else {
                recycle.put(consume batch)
            }
        }
        await transport.finish(outcomes: ledger)
    }
}

/// The runtime: a source, a chain of stages and a transport, each in its own
/// actor, joined by bounded channels of batches.
///
/// - Order: batches move FIFO through every stage, so the transport sees
///   requests in source order.
/// - Backpressure: each channel holds `bufferedBatches` batches; when the
///   transport is slow the channels fill and the source waits in `emit`.
/// - Shutdown: cancelling the task that runs ``run()`` stops the source;
///   everything already emitted drains through the stages and the transport,
///   and every request ends in exactly one outcome, which the ledger checks.
public final class Pipeline: Sendable {
    public let source: any NotificationSource
    public let stages: [NamedStage]
    public let transport: any Transport
    public let ledger: OutcomeLedger
    public let options: PipelineOptions
    let stop = StopSignal()
    let abandonment = Abandonment()
    let metrics: PipelineMetrics?

    /// `metrics`: where the pipeline's own metrics go (per stage: requests,
    /// decided, time per batch; each outcome's latency; see `PipelineMetrics`),
    /// e.g. `MetricsSystem.factory` or a Prometheus registry's factory; none by default.
    public init(
        source: any NotificationSource, stages: [NamedStage], transport: any Transport,
        ledger: OutcomeLedger = OutcomeLedger(), options: PipelineOptions = PipelineOptions(),
        metrics: (any MetricsFactory)? = nil
    ) {
        self.source = source
        self.stages = stages
        self.transport = transport
        self.ledger = ledger
        self.options = options
        self.metrics = metrics.map { PipelineMetrics(factory: $0) }
        // First: an outcome other observers have seen (serve's GET, the webhook) is timed already.
        if let latency = self.metrics?.latency { ledger.addFirstObserver(latency) }
    }

    /// The names of the stages, in order.
    public var stageNames: [String] { stages.map(\.name) }

    /// Asks the source to stop; what is in flight drains (the transport starts
    /// its shutdown deadline now). Same as cancelling `run()`.
    public func shutdown() {
        stop.set()
        transport.shutdownRequested()
    }

    /// Stops at once (a second signal): the source stops; every stage stops
    /// waiting (its task is cancelled) and fails what reaches it from now on
    /// with `reason` (code `abandoned`) instead of passing it on; the
    /// transport fails what it holds the same way instead of draining it.
    /// Every request still ends in one outcome.
    public func abandon(_ reason: String) {
        stop.set()
        abandonment.abandon(reason)
        transport.abandon(reason)
    }

    /// Runs until the source is exhausted (or shutdown) and everything has drained.
    /// - Returns: the ledger's final counts.
    /// - Throws: ``PipelineError`` if the source failed (after draining what it
    ///   emitted), or ``LedgerImbalance`` if the books do not balance.
    @discardableResult
    public func run() async throws -> LedgerSnapshot {
        let channels = (0...stages.count).map { _ in BoundedChannel<[Envelope]>(capacity: max(1, options.bufferedBatches)) }
        let ledger = self.ledger
        let stop = self.stop
        let sinkChannel = channels[0]
        let source = self.source
        let batchSize = max(1, options.batchSize)
        let threads = options.effectiveThreads
        let latency = metrics?.latency
        let pool = BatchPool(capacity: channels.count * max(1, options.bufferedBatches) + 2)

        // Observers are called by a task of their own from here on, not on a stage's
        // or the transport's thread (an event loop): see ``OutcomeObserver``.
        let relay = ledger.startRelay(bound: options.observerBacklog)
        let relaying = relay.map { relay in Task { await relay.run { ledger.observerList } } }

        // Runners are unstructured tasks on purpose: cancelling run() must not
        // cancel them, or in-flight requests would be lost instead of drained.
        var tasks: [Task<Void, Never>] = []
        let rows = Self.rows(stages, threads: threads)
        for row in rows {
            let input = channels[row.lowerBound], output = channels[row.upperBound]
            if row.count == 1 && (threads == 1 || !stages[row.lowerBound].isConcurrent) {
                let runner = StageRunner(stages[row.lowerBound], metrics: metrics, abandonment: abandonment)
                tasks.append(Task { await runner.run(input: input, output: output, ledger: ledger) })
            } else {
                let runner = ConcurrentRowRunner(Array(stages[row]), window: 2 * threads, metrics: metrics, abandonment: abandonment)
                tasks.append(Task { await runner.run(input: input, output: output, ledger: ledger) })
            }
        }
        // The channels between the stages of a concurrent row are not used: closed, so nothing waits on them.
        for row in rows where row.count > 1 {
            for k in (row.lowerBound + 1)..<row.upperBound { channels[k].close() }
        }
        abandonment.register(tasks)
        let transportRunner = TransportRunner(transport, metrics: metrics)
        let last = channels[stages.count]
        tasks.append(Task { await transportRunner.run(input: last, ledger: ledger, recycle: pool, releaseApart: threads > 1) })

        let sourceTask = Task<(any Error)?, Never> {
            let sink = SourceSink(
                batchSize: batchSize, output: sinkChannel, ledger: ledger, stop: stop, latency: latency, pool: pool, threads: threads)
            var failure: (any Error)?
            do {
                try await source.produce(into: sink)
            } catch {
                failure = error
            }
            await sink.flush()
            sinkChannel.close()
            return failure
        }

        let sourceError = await withTaskCancellationHandler {
            await sourceTask.value
        } onCancel: {
            stop.set()
            transport.shutdownRequested()
        }
        for t in tasks { await t.value }
        // Every outcome is recorded: the observers see the last of them before run() returns.
        if let relay {
            ledger.stopRelay(relay)
            await relaying?.value
        }

        let snapshot = ledger.snapshot
        if let sourceError { throw PipelineError.sourceFailed(sourceError, snapshot) }
        if !snapshot.isBalanced { throw LedgerImbalance(snapshot: snapshot) }
        return snapshot
    }

    /// The stages grouped as they run: with more than one thread, each run of
    /// consecutive ``ConcurrentStage``s is one row (one ``ConcurrentRowRunner``);
    /// every other stage, and every stage on one thread, is a row of its own
    /// (one ``StageRunner`` actor). Ranges of `stages`' indexes, in order.
    static func rows(_ stages: [NamedStage], threads: Int) -> [Range<Int>] {
        var rows: [Range<Int>] = []
        var k = 0
        while k < stages.count {
            var end = k + 1
            if threads > 1 && stages[k].isConcurrent {
                while end < stages.count && stages[end].isConcurrent { end += 1 }
            }
            rows.append(k..<end)
            k = end
        }
        return rows
    }

    /// Records and removes the envelopes a stage decided.
    static func settleDecided(_ batch: inout [Envelope], ledger: OutcomeLedger) {
        guard batch.contains(where: { $0.outcome != nil }) else { return }
        var decided: [OutcomeRecord] = []
        batch.removeAll { e in
            guard let o = e.outcome else { return false }
            decided.append(e.record(o))
            return true
        }
        ledger.record(decided)
    }
}

/// Empty batch arrays handed back by the transport runner for the source to
/// fill again: a batch's storage is allocated once per run, not once per
/// batch (a fresh 200 KB array per batch came from newly mapped pages, and
/// the page faults were a tenth of the pipeline's time).
package final class BatchPool: Sendable {
    let capacity: Int
    let free = Mutex<[[Envelope]]>([])
    init(capacity: Int) { self.capacity = capacity }

    /// An empty array, with the capacity of the batches it held before if one is free.
    package func take() -> [Envelope] { free.withLock { $0.popLast() } ?? [] }

    /// Empties `batch` (releasing its envelopes) and keeps its storage for the
    /// source. (If a transport still holds the batch, emptying it allocates a
    /// fresh buffer instead: the transport's copy is left alone.)
    func put(_ batch: consuming [Envelope]) {
        var b = consume batch
        b.removeAll(keepingCapacity: true)
        free.withLock { if $0.count < capacity { $0.append(b) } }
    }
}

/// Why a pipeline run failed.
public enum PipelineError: Error, CustomStringConvertible {
    /// The source threw; what it had emitted was drained first.
    case sourceFailed(any Error, LedgerSnapshot)

    public var description: String {
        switch self {
        case .sourceFailed(let e, let s): return "source failed: \(e) (after draining: \(s))"
        }
    }
}
