import HeraldCore
import HeraldJSON

/// The recorder's logs as a source of requests, for `herald replay`: each
/// record, without the recorder's own keys (`time`, `seq`, `frame`), is a
/// request in the raw form (`RequestDecoder`), so replay runs the same stages,
/// ledger and outcomes as `herald send`. Records are numbered from 1 across
/// the whole log (the outcomes' `line`); damage in the log is reported through
/// `onProblem` and the good records around it are sent.
public struct RecordingSource: NotificationSource {
    public let paths: [String]
    public let timeRange: ClosedRange<Int64>?
    let onProblem: @Sendable (LogProblem) -> Void

    public init(paths: [String], timeRange: ClosedRange<Int64>? = nil, onProblem: @escaping @Sendable (LogProblem) -> Void) {
        self.paths = paths
        self.timeRange = timeRange
        self.onProblem = onProblem
    }

    /// The keys the recorder adds to a request.
    public static let recorderKeys: Set<String> = ["time", "seq", "frame"]

    public func produce(into sink: SourceSink) async throws {
        let reader = try LogReader(paths: paths)
        reader.timeRange = timeRange
        reader.onProblem = onProblem
        let decoder = RequestDecoder()
        var n = 0
        while let record = reader.next() {
            if sink.isStopping { return }
            n += 1
            let request = JSONObject(record.object.entries.filter { !Self.recorderKeys.contains($0.key) }.map { ($0.key, $0.value) })
            do {
                await sink.emit(try decoder.decode(.object(request)), line: n)
            } catch {
                let id = request["id"]?.numberValue?.intValue.flatMap { UInt32(exactly: $0) }
                let token = request["token"]?.stringValue.flatMap { try? DeviceToken(hex: $0) }
                await sink.emitInvalid(line: n, reason: "\(record.segment) (member at \(record.offset)): \(error.message)", id: id, token: token)
            }
        }
    }
}
