import HeraldCore
import HeraldJSON
import Synchronization

/// How far a source has read its input: bytes consumed, and the total when known (-1 otherwise).
public final class InputProgress: Sendable {
    public let consumed = Atomic<Int>(0)
    public let total = Atomic<Int>(-1)
    public init() {}
}

/// Reads JSON Lines requests from a file or standard input (`-`), streaming:
/// memory stays bounded whatever the file's size. Blank lines are skipped;
/// a line that is not a valid request ends as `dropped`, naming the line and
/// what is wrong with it, and the rest of the file carries on.
public struct JSONLinesSource: NotificationSource {
    public let path: String
    public let decoder: RequestDecoder
    /// Where the source reports how far it has read, for progress lines.
    public let progress: InputProgress?

    public init(path: String, decoder: RequestDecoder = RequestDecoder(), progress: InputProgress? = nil) {
        self.path = path
        self.decoder = decoder
        self.progress = progress
    }

    public func produce(into sink: SourceSink) async throws {
        var reader = try LineReader(path: path)
        progress?.total.store(reader.size ?? -1, ordering: .relaxed)
        if sink.threads > 1 { return try await produceInParallel(&reader, into: sink) }
        var idle = 0
        while let line = try reader.nextIfReady() {
            if sink.isStopping { return }
            progress?.consumed.store(reader.bytesConsumed, ordering: .relaxed)
            if case .notReady = line {
                // A pipe with nothing waiting: send what we have so it is not held back, then wait without blocking a thread.
                await Self.idle(&idle, sink)
                continue
            }
            idle = 0
            if let input = Self.classify(line, maximumLineLength: reader.maximumLineLength, decoder: decoder) { await Self.emit(input, to: sink) }
        }
    }

    /// Hands one line's input to the sink: a request, or its `dropped` reason.
    static func emit(_ input: consuming LineInput, to sink: SourceSink) async {
        switch consume input {
        case .request(let request, let n): await sink.emit(request, line: n)
        case .invalid(let n, let reason, let id, let token): await sink.emitInvalid(line: n, reason: reason, id: id, token: token)
        }
    }

    /// A pipe with nothing waiting: what the sink holds goes out, then a wait (1 ms, doubling to
    /// 64 ms while nothing comes) without blocking a thread.
    static func idle(_ rounds: inout Int, _ sink: SourceSink) async {
        await sink.flush()
        rounds = min(rounds + 1, 6)
        try? await Task.sleep(for: .milliseconds(1 << rounds))
    }

    /// ``produce(into:)`` on `sink.threads` threads: lines are copied into
    /// chunks of up to a batch of lines, each chunk decoded by a task of its
    /// own into a batch (built in storage the pipeline is done with, and
    /// handed on as it is, not copied), at most twice `threads` chunks at
    /// once, and the chunks' requests emitted in input order, so outcomes,
    /// sequences and the ledger are as on one thread. Memory stays bounded by
    /// the chunks in flight.
    func produceInParallel(_ reader: inout LineReader, into sink: SourceSink) async throws {
        let decoder = self.decoder, maximum = reader.maximumLineLength, pool = sink.pool
        var inFlight: [Task<[Decoded], Never>] = []  // oldest first; at most `window`
        let window = 2 * sink.threads
        let lines = sink.batchSize
        var chunk = LineChunk(lines: lines)
        var idle = 0

        func emit(_ reversed: consuming [Decoded]) async {
            // Last first from a reversed array: each piece moves out (a run of envelopes stays
            // the only reference to its array, so numbering it copies nothing).
            var reversed = reversed
            while let piece = reversed.popLast() {
                switch consume piece {
                case .envelopes(let envelopes): await sink.emit(prepared: envelopes)
                case .invalid(let n, let reason, let id, let token): await sink.emitInvalid(line: n, reason: reason, id: id, token: token)
                }
            }
        }
        func oldest() async -> [Decoded] {
            // Removed before it is awaited: a finished task keeps its result while anything holds it.
            await inFlight.removeFirst().value
        }
        func dispatch(_ full: consuming LineChunk) {
            let full = consume full
            inFlight.append(Task { full.decode(maximumLineLength: maximum, decoder: decoder, pool: pool) })
        }

        // A read that fails mid-file: what was read before it still goes out, then the error.
        var failure: IOError?
        do throws(IOError) {
            while let line = try reader.nextIfReady() {
                if sink.isStopping { return }
                progress?.consumed.store(reader.bytesConsumed, ordering: .relaxed)
                if case .notReady = line {
                    // A pipe with nothing waiting: what was read goes out now, not held back for a full chunk.
                    if !chunk.isEmpty { dispatch(chunk); chunk = LineChunk(lines: lines) }
                    while !inFlight.isEmpty { await emit(await oldest()) }
                    await Self.idle(&idle, sink)
                    continue
                }
                idle = 0
                chunk.add(line)
                if chunk.isFull {
                    dispatch(chunk)
                    chunk = LineChunk(lines: lines)
                    if inFlight.count >= window { await emit(await oldest()) }
                }
            }
        } catch {
            failure = error
        }
        if !chunk.isEmpty { dispatch(chunk) }
        while !inFlight.isEmpty {
            if sink.isStopping { return }
            await emit(await oldest())
        }
        if let failure { throw failure }
    }

    /// Lines copied out of the reader's buffer, to be decoded on another thread.
    struct LineChunk: Sendable {
        static let bytes = 1 << 20
        /// Lines a chunk holds at most (a batch's worth).
        let lines: Int
        var text: [UInt8] = []
        /// Each line's number and its range in `text`; a line too long has `start` -1.
        var entries: [(number: Int, start: Int, end: Int)] = []
        var isEmpty: Bool { entries.isEmpty }
        var isFull: Bool { entries.count >= lines || text.count >= Self.bytes }

        init(lines: Int) {
            self.lines = max(1, lines)
            entries.reserveCapacity(self.lines)
        }

        mutating func add(_ line: LineReader.Line) {
            switch line {
            case .notReady: break
            case .tooLong(let n): entries.append((n, -1, -1))
            case .line(let n, let bytes):
                if text.isEmpty { text.reserveCapacity(min(bytes.count * lines, Self.bytes)) }
                let start = text.count
                text.append(contentsOf: bytes)
                entries.append((n, start, text.count))
            }
        }

        /// The lines decoded: runs of envelopes (built here, on the decoding
        /// thread, numbered when emitted) and what could not be decoded between
        /// them; last piece first (the source pops them off the end).
        func decode(maximumLineLength: Int, decoder: RequestDecoder, pool: BatchPool? = nil) -> [Decoded] {
            var out: [Decoded] = []
            var run = pool?.take() ?? []
            run.reserveCapacity(entries.count)
            text.withUnsafeBytes { all in
                for e in entries {
                    let line: LineReader.Line =
                        e.start < 0 ? .tooLong(number: e.number) : .line(number: e.number, bytes: UnsafeRawBufferPointer(rebasing: all[e.start..<e.end]))
                    switch JSONLinesSource.classify(line, maximumLineLength: maximumLineLength, decoder: decoder) {
                    case nil: break
                    case .request(let request, let n)?: run.append(Envelope(sequence: 0, line: n, request: request))
                    case .invalid(let n, let reason, let id, let token)?:
                        if !run.isEmpty {
                            out.append(.envelopes(run))
                            run = []
                        }
                        out.append(.invalid(line: n, reason: reason, id: id, token: token))
                    }
                }
            }
            if !run.isEmpty { out.append(.envelopes(run)) }
            out.reverse()
            return out
        }
    }

    /// A piece of a decoded chunk: consecutive requests, ready as envelopes, or a line that is not one.
    enum Decoded: Sendable {
        case envelopes([Envelope])
        case invalid(line: Int, reason: String, id: UInt32?, token: DeviceToken?)
    }

    /// What one input line is.
    public enum LineInput: Sendable {
        case request(NotificationRequest, line: Int)
        /// Not a valid request: why, with its id and token when they can be read.
        case invalid(line: Int, reason: String, id: UInt32?, token: DeviceToken?)
    }

    /// Why a line whose `send-at` is to come is not sent.
    static let notScheduled =
        "\"send-at\" is still to come, and herald send sends now, holding nothing for later: schedule it through herald serve, HeraldClient or the queue (herald enqueue)"

    /// Decodes one line; `nil` for a blank line (or no line yet); a request whose `send-at` is
    /// still to come is invalid here (``notScheduled``).
    public static func classify(_ line: LineReader.Line, maximumLineLength: Int, decoder: RequestDecoder) -> LineInput? {
        switch line {
        case .notReady: return nil
        case .tooLong(let n):
            return .invalid(line: n, reason: "line longer than \(maximumLineLength) bytes", id: nil, token: nil)
        case .line(let n, let bytes):
            guard let bytes = RequestLine.content(line: n, bytes) else { return nil }
            let decoded = RequestLine.decode(bytes, decoder: decoder)
            switch consume decoded {
            case .request(let request):
                // A file holds nothing for later: a send-at to come is refused, not sent early.
                if let at = request.sendAt, at > Duration.sinceEpochMilliseconds {
                    return .invalid(line: n, reason: notScheduled, id: request.id, token: request.token)
                }
                return .request(request, line: n)
            case .invalid(let reason, let id, let token): return .invalid(line: n, reason: reason, id: id, token: token)
            }
        }
    }
}
