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
            guard case .line(let n, let bytes) = line else {
                if let input = Self.classify(line, maximumLineLength: reader.maximumLineLength, decoder: decoder) { await Self.emit(input, to: sink) }
                continue
            }
            guard let bytes = RequestLine.content(line: n, bytes) else { continue }
            // Decoded where it is to stay, in the batch being filled.
            var invalid: InvalidLine?
            let full = sink.append(line: n) { r in
                invalid = Self.decode(bytes, line: n, decoder: decoder, into: &r)
                return invalid == nil
            }
            if let invalid { await Self.emit(invalid.input, to: sink) } else if full == true { await sink.flush() }
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
                    let n = e.number
                    var invalid: InvalidLine?
                    if e.start < 0 {
                        invalid = JSONLinesSource.tooLong(line: n, maximumLineLength: maximumLineLength)
                    } else {
                        guard let bytes = RequestLine.content(line: n, UnsafeRawBufferPointer(rebasing: all[e.start..<e.end])) else { continue }
                        // Decoded where it is to stay, in the run.
                        _ = run.append(sequence: 0, line: n) { r in
                            invalid = JSONLinesSource.decode(bytes, line: n, decoder: decoder, into: &r)
                            return invalid == nil
                        }
                    }
                    if let invalid {
                        if !run.isEmpty {
                            out.append(.envelopes(run))
                            run = []
                        }
                        out.append(.invalid(line: n, reason: invalid.reason, id: invalid.id, token: invalid.token))
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
            return tooLong(line: n, maximumLineLength: maximumLineLength).input
        case .line(let n, let bytes):
            guard let bytes = RequestLine.content(line: n, bytes) else { return nil }
            var request = NotificationRequest.blank
            if let invalid = decode(bytes, line: n, decoder: decoder, into: &request) { return invalid.input }
            return .request(request, line: n)
        }
    }

    /// A line that is not a request to send: what ``LineInput/invalid(line:reason:id:token:)``
    /// holds, on its own (a `LineInput?` holds a request's room, some 400 bytes written at each
    /// assignment).
    struct InvalidLine {
        let line: Int, reason: String, id: UInt32?, token: DeviceToken?
        var input: LineInput { .invalid(line: line, reason: reason, id: id, token: token) }
    }

    static func tooLong(line n: Int, maximumLineLength: Int) -> InvalidLine {
        InvalidLine(line: n, reason: "line longer than \(maximumLineLength) bytes", id: nil, token: nil)
    }

    /// Line `n`'s text (``RequestLine/content(line:_:)``) decoded into `r`, a
    /// ``NotificationRequest/blank`` request where it is to stay: nil when `r` holds a request
    /// to send, else why not (`r` then part written, to be discarded).
    static func decode(_ bytes: UnsafeRawBufferPointer, line n: Int, decoder: RequestDecoder, into r: inout NotificationRequest) -> InvalidLine? {
        if let bad = RequestLine.decode(bytes, decoder: decoder, into: &r) { return InvalidLine(line: n, reason: bad.reason, id: bad.id, token: bad.token) }
        // A file holds nothing for later: a send-at to come is refused, not sent early.
        if let at = r.sendAt, at > Duration.sinceEpochMilliseconds { return InvalidLine(line: n, reason: notScheduled, id: r.id, token: r.token) }
        return nil
    }
}
