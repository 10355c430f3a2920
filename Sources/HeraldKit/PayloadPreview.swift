import HeraldCore

/// Shows what each request of a JSON Lines file becomes on the wire: runs the
/// configured localize → payload → size-guard stages (the same stages
/// `herald send` assembles) and reports, per request line, the exact compact
/// payload or the `dropped` outcome.
///
/// Streams: at most one batch of requests is held at a time. Blank lines are
/// skipped, as `herald send` does.
public struct PayloadPreview: Sendable {
    /// What one request line became.
    public enum Result: Sendable, Hashable {
        /// The payload that would be sent, byte for byte.
        case payload([UInt8])
        /// The request would not be sent: its outcome record.
        case outcome(OutcomeRecord)
        /// The payload that would be sent, cut down by the size guard from `from` bytes; `record` names the request.
        case truncated([UInt8], from: Int, record: OutcomeRecord)

        /// The line to print: the payload, or the outcome as `OutcomeWriter` writes it.
        public var line: [UInt8] {
            switch self {
            case .payload(let p), .truncated(let p, _, _): return p
            case .outcome(let r): return OutcomeWriter.line(r)
            }
        }
    }

    public let stages: [(StagePosition, NamedStage)]
    public let decoder: RequestDecoder
    public let batchSize: Int

    /// The assembly's localize, payload and size-guard stages (and the frame
    /// stage with `framing`: what `herald validate` checks).
    public init(assembly: HeraldAssembly, batchSize: Int = 256, framing: Bool = false) throws {
        let wanted: Set<StagePosition> = framing ? [.localize, .payload, .sizeGuard, .frame] : [.localize, .payload, .sizeGuard]
        stages = try assembly.builtinStages().filter { wanted.contains($0.0) }
        decoder = RequestDecoder()
        self.batchSize = max(1, batchSize)
    }

    /// Reads `path` (or standard input for `-`) and calls `emit` once per request line, in order.
    public func run(path: String, emit: (Result) -> Void) async throws {
        var reader = try LineReader(path: path)
        var pending: [Result?] = []  // one slot per line: a result now, or nil for the next envelope of `batch`
        var batch: [Envelope] = []
        var sequence: UInt64 = 0
        pending.reserveCapacity(batchSize)
        batch.reserveCapacity(batchSize)
        while let line = try reader.next() {
            let result: Result?
            switch JSONLinesSource.classify(line, maximumLineLength: reader.maximumLineLength, decoder: decoder) {
            case nil: continue
            case .request(let request, let n)?:
                batch.append(Envelope(sequence: sequence, line: n, request: request))
                result = nil
            case .invalid(let n, let reason, let id, let token)?:
                result = .outcome(OutcomeRecord(sequence: sequence, line: n, id: id, token: token, outcome: .dropped(OutcomeReason(.invalidRequest, "line \(n): \(reason)"))))
            }
            sequence += 1
            pending.append(result)
            if pending.count >= batchSize {
                try await flush(&pending, &batch, emit)
            }
        }
        try await flush(&pending, &batch, emit)
    }

    func flush(_ pending: inout [Result?], _ batch: inout [Envelope], _ emit: (Result) -> Void) async throws {
        var before: [Int] = []
        for (position, s) in stages {
            if position == .sizeGuard { before = batch.map(\.payload.count) }
            await s.run(&batch)
        }
        var next = 0
        for result in pending {
            if let result {
                emit(result)
            } else {
                let e = batch[next]
                let built = next < before.count ? before[next] : e.payload.count
                next += 1
                if let outcome = e.outcome {
                    emit(.outcome(e.record(outcome)))
                } else if built != e.payload.count {
                    emit(.truncated(e.payload, from: built, record: e.record(.accepted)))
                } else {
                    emit(.payload(e.payload))
                }
            }
        }
        pending.removeAll(keepingCapacity: true)
        batch.removeAll(keepingCapacity: true)
    }
}
