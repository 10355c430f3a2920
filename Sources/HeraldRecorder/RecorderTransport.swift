import HeraldCore
import HeraldJSON
import Synchronization

/// A transport that sends nothing: it records every notification it is given
/// in a gzip-compressed JSON Lines log (`zcat` reads it), one line each:
///
/// `{"seq":0,"id":42,"token":"<hex>","expiry":0,"priority":10,"frame":"<hex>","payload":{…}}`
///
/// A notification is `accepted` once its line is compressed and flushed to the
/// file (a sync flush per batch), so a crash loses no line already reported.
/// A write error fails the batch with the error. For dry runs, audits, replay.
public final class RecorderTransport: Transport {
    let writer: Mutex<GzipFileWriter?>
    public let path: String
    let includeFrames: Bool

    public init(path: String, includeFrames: Bool = true) throws(RecorderError) {
        self.path = path
        self.includeFrames = includeFrames
        writer = Mutex(try GzipFileWriter(path: path))
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        var w = JSONWriter(capacity: batch.count * 256)
        for e in batch { Self.appendLine(e, includeFrame: includeFrames, to: &w) }
        let result: Result<Void, RecorderError> = writer.withLock { writer in
            guard let writer else { return .failure(RecorderError(path: path, message: "recorder is closed")) }
            return Result { () throws(RecorderError) in try writer.write(w.bytes, flush: true) }
        }
        switch result {
        case .success: outcomes.record(batch.map { $0.record(.accepted) })
        case .failure(let error): outcomes.record(batch.map { $0.record(.failed(OutcomeReason(.internalFailure, "recorder: \(error)"))) })
        }
    }

    public func finish(outcomes: OutcomeLedger) async {
        writer.withLock { w in
            try? w?.finish()
            w = nil
        }
    }

    static func appendLine(_ e: Envelope, includeFrame: Bool, to w: inout JSONWriter) {
        w.raw("{\"seq\":")
        w.int(Int(e.sequence))
        if let id = e.request.id { w.raw(",\"id\":"); w.int(Int(id)) }
        w.raw(",\"token\":")
        w.string(e.request.token.hex)
        if let expiry = e.request.expiry { w.raw(",\"expiry\":"); w.int(Int(expiry)) }
        if let p = e.request.priority { w.raw(",\"priority\":"); w.int(Int(p.rawValue)) }
        if includeFrame, let frame = e.frame {
            w.raw(",\"frame\":\"")
            Hex.append(frame.bytes, to: &w.bytes)
            w.byte(UInt8(ascii: "\""))
        }
        w.raw(",\"payload\":")
        if e.payload.isEmpty { w.raw("null") } else { w.bytes.append(contentsOf: e.payload) }
        w.raw("}\n")
    }
}

/// Reads a recorder log back line by line, streaming, checking each line is
/// a JSON object. Errors name the file and the line.
public final class RecordingReader {
    let gzip: GzipFileReader
    var pending: [UInt8] = []
    var line = 0
    public let path: String

    public init(path: String) throws(RecorderError) {
        self.path = path
        gzip = try GzipFileReader(path: path)
    }

    /// The next record, or `nil` at the end.
    public func next() throws(RecorderError) -> JSONObject? {
        while true {
            if let nl = pending.firstIndex(of: 0x0A) {
                line += 1
                let bytes = pending[..<nl]
                defer { pending.removeSubrange(...nl) }
                do {
                    guard case .object(let o) = try JSONParser.parse(bytes) else {
                        throw RecorderError(path: path, message: "line \(line): not a JSON object")
                    }
                    return o
                } catch let e as JSONError {
                    throw RecorderError(path: path, message: "line \(line): \(e)")
                } catch {
                    throw error as! RecorderError
                }
            }
            guard let chunk = try gzip.nextChunk() else {
                if pending.isEmpty { return nil }
                throw RecorderError(path: path, message: "line \(line + 1): the log ends in the middle of a line")
            }
            pending.append(contentsOf: chunk)
            if pending.count > 64 << 20 { throw RecorderError(path: path, message: "line \(line + 1): longer than 64 MiB") }
        }
    }
}
