import HeraldCore

/// Streams a JSON Lines file into the queue: each non-blank line becomes a
/// queued row holding the line's text exactly (checked only when a worker
/// claims it, so a malformed line ends `dropped` like in `herald send`), in
/// batches of one `INSERT` each. Memory stays bounded whatever the file's size.
///
/// A line PostgreSQL's `text` cannot hold (invalid UTF-8, a NUL byte) or one
/// over the line length limit is not enqueued: it is counted, with its line
/// number, in ``Report/notEnqueued``.
public struct QueueEnqueuer: Sendable {
    public let queue: PostgresQueue
    /// Lines per `INSERT`.
    public var batch: Int

    public init(queue: PostgresQueue, batch: Int = 5000) {
        self.queue = queue
        self.batch = batch
    }

    /// What ``enqueue(path:)`` did.
    public struct Report: Sendable, Hashable {
        /// Rows inserted.
        public var enqueued = 0
        /// Lines that could not become rows.
        public var notEnqueued = 0
        /// The first few of those, with why.
        public var notEnqueuedLines: [String] = []
        /// Lines read (blank ones included).
        public var lines = 0
    }

    /// Enqueues every request line of `path` (`-`: standard input).
    public func enqueue(path: String) async throws -> Report {
        var reader: LineReader
        do { reader = try LineReader(path: path) } catch { throw QueueError("cannot read \(path): \(error)") }
        var report = Report()
        var bodies: [String] = []
        bodies.reserveCapacity(batch)
        func refuse(_ n: Int, _ why: String) {
            report.notEnqueued += 1
            if report.notEnqueuedLines.count < 10 { report.notEnqueuedLines.append("line \(n): \(why)") }
        }
        while true {
            let line: LineReader.Line?
            do { line = try reader.next() } catch { throw QueueError("cannot read \(path): \(error)") }
            guard let line else { break }
            switch line {
            case .notReady: continue
            case .tooLong(let n):
                report.lines = n
                refuse(n, "longer than \(reader.maximumLineLength) bytes")
            case .line(let n, let bytes):
                report.lines = n
                guard let text = RequestLine.content(line: n, bytes) else { continue }
                if text.contains(0) {
                    refuse(n, "holds a NUL byte")
                } else if let body = String(validating: text, as: UTF8.self) {
                    bodies.append(body)
                } else {
                    refuse(n, "not valid UTF-8")
                }
            }
            if bodies.count >= batch {
                report.enqueued += try await queue.enqueue(bodies)
                bodies.removeAll(keepingCapacity: true)
            }
        }
        if !bodies.isEmpty { report.enqueued += try await queue.enqueue(bodies) }
        return report
    }
}
