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
        var idle = 0
        while let line = try reader.nextIfReady() {
            if sink.isStopping { return }
            progress?.consumed.store(reader.bytesConsumed, ordering: .relaxed)
            if case .notReady = line {
                // A pipe with nothing waiting: send what we have so it is not held back, then wait without blocking a thread.
                await sink.flush()
                idle = min(idle + 1, 6)
                try? await Task.sleep(for: .milliseconds(1 << idle))
                continue
            }
            idle = 0
            switch Self.classify(line, maximumLineLength: reader.maximumLineLength, decoder: decoder) {
            case .request(let request, let n)?: await sink.emit(request, line: n)
            case .invalid(let n, let reason, let id, let token)?: await sink.emitInvalid(line: n, reason: reason, id: id, token: token)
            case nil: continue
            }
        }
    }

    /// What one input line is.
    public enum LineInput {
        case request(NotificationRequest, line: Int)
        /// Not a valid request: why, with its id and token when they can be read.
        case invalid(line: Int, reason: String, id: UInt32?, token: DeviceToken?)
    }

    /// Decodes one line; `nil` for a blank line (or no line yet).
    public static func classify(_ line: LineReader.Line, maximumLineLength: Int, decoder: RequestDecoder) -> LineInput? {
        switch line {
        case .notReady: return nil
        case .tooLong(let n):
            return .invalid(line: n, reason: "line longer than \(maximumLineLength) bytes", id: nil, token: nil)
        case .line(let n, let bytes):
            guard let bytes = RequestLine.content(line: n, bytes) else { return nil }
            switch RequestLine.decode(bytes, decoder: decoder) {
            case .request(let request): return .request(request, line: n)
            case .invalid(let reason, let id, let token): return .invalid(line: n, reason: reason, id: id, token: token)
            }
        }
    }
}
