import HeraldCore
import HeraldJSON
import Logging
import Synchronization

/// A transport that sends nothing: it records every notification it is given
/// in a segmented, gzip-compressed JSON Lines log (``SegmentedLogWriter``), an
/// audit trail that `herald inspect` reads and `herald replay` sends again.
///
/// Each line is a request in Herald's raw request form plus when and in
/// which order it was recorded, and its binary frame:
///
/// `{"time":1700000000123,"seq":0,"id":42,"token":"<hex>","topic":"com.example.app","expiry":0,"priority":10,"payload":{…},"frame":"<hex>"}`
///
/// A notification is `accepted` once its batch's gzip member is written to
/// the segment (the kernel has it: a killed process loses nothing accepted).
/// A write error fails that batch, naming the segment, and leaves no partial
/// member behind.
public final class RecorderTransport: Transport {
    let writer: Mutex<(log: SegmentedLogWriter, finished: Bool)>
    public let directory: String
    let includeFrames: Bool

    public init(directory: String, options: RecorderOptions = RecorderOptions(), logger: Logger = Logger(label: "herald.recorder")) throws(RecorderError) {
        self.directory = directory
        includeFrames = options.includeFrames
        writer = Mutex((try SegmentedLogWriter(directory: directory, options: options, logger: logger), false))
    }

    /// Bytes recorded (uncompressed JSON Lines, and as written), and the segments made.
    public var statistics: (bytesIn: Int, bytesOut: Int, segments: [String]) {
        writer.withLock { w in (w.log.bytesIn, w.log.bytesOut, w.log.segments) }
    }

    public func send(_ batch: [Envelope], outcomes: OutcomeLedger) async throws {
        guard !batch.isEmpty else { return }
        let clock = Duration.sinceEpoch.components
        let now = clock.seconds * 1000 + clock.attoseconds / 1_000_000_000_000_000  // milliseconds
        var w = JSONWriter(capacity: batch.count * 384)
        for e in batch { Self.appendLine(e, time: now, includeFrame: includeFrames, to: &w) }
        let result: Result<Void, RecorderError> = writer.withLock { writer in
            guard !writer.finished else { return .failure(RecorderError(path: directory, message: "recorder is closed")) }
            return Result { () throws(RecorderError) in try writer.log.append(w.bytes, records: batch.count, first: now, last: now) }
        }
        switch result {
        case .success: outcomes.record(batch, as: .accepted)
        case .failure(let error): outcomes.record(batch, as: .failed(OutcomeReason(.internalFailure, "recorder: \(error)")))
        }
    }

    public func finish(outcomes: OutcomeLedger) async {
        writer.withLock { w in
            w.log.close()
            w.finished = true
        }
    }

    /// One record: the request in the raw form `RequestDecoder` reads back, with the recorder's keys first.
    static func appendLine(_ e: Envelope, time: Int64, includeFrame: Bool, to w: inout JSONWriter) {
        let r = e.request
        w.raw("{\"time\":")
        w.int(Int(time))
        w.raw(",\"seq\":")
        w.int(Int(e.sequence))
        if let id = r.id { w.raw(",\"id\":"); w.int(Int(id)) }
        if let channel = r.channelID {
            w.raw(",\"channel-id\":")
            w.string(channel)
        } else {
            w.raw(",\"token\":\"")
            r.token.withUnsafeBytes { Hex.append($0, to: &w.bytes) }
            w.byte(UInt8(ascii: "\""))
        }
        if let t = r.topic { w.raw(",\"topic\":"); w.string(t) }
        if let t = r.pushType { w.raw(",\"push-type\":"); w.string(t.rawValue) }
        if let c = r.collapseID { w.raw(",\"collapse-id\":"); w.string(c) }
        if let a = r.apnsID { w.raw(",\"apns-id\":"); w.string(a) }
        if let expiry = r.expiry { w.raw(",\"expiry\":"); w.int(Int(expiry)) }
        if let p = r.priority { w.raw(",\"priority\":"); w.int(Int(p.rawValue)) }
        w.raw(",\"payload\":")
        if e.payload.isEmpty { w.raw("null") } else { w.bytes.append(contentsOf: e.payload) }
        if includeFrame, let frame = e.frame {
            w.raw(",\"frame\":\"")
            frame.bytes.withUnsafeBytes { Hex.append($0, to: &w.bytes) }
            w.byte(UInt8(ascii: "\""))
        }
        w.raw("}\n")
    }
}
