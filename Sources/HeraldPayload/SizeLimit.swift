import HeraldCore

/// A payload size limit, by interface profile or as a number of bytes.
public struct SizeLimit: Sendable, Hashable, CustomStringConvertible {
    public let bytes: Int
    public let name: String
    /// Whether this is the `http2` profile (VoIP and broadcast pushes may be larger), decided once:
    /// ``bytes(for:)`` runs for every payload.
    @usableFromInline let isHTTP2: Bool
    public init(bytes: Int, name: String = "custom") {
        self.bytes = bytes
        self.name = name
        isHTTP2 = name == "http2"
    }
    /// The binary interface as the seed documents describe it.
    public static let legacyBinary = SizeLimit(bytes: 256, name: "binary-legacy")
    /// The binary interface since iOS 8.
    public static let binary = SizeLimit(bytes: 2048, name: "binary")
    /// The HTTP/2 provider API.
    public static let http2 = SizeLimit(bytes: 4096, name: "http2")
    /// VoIP pushes on the HTTP/2 provider API.
    public static let voip = SizeLimit(bytes: 5120, name: "voip")

    public static let profiles: [SizeLimit] = [.legacyBinary, .binary, .http2, .voip]

    /// Looks up a profile by name.
    public static func profile(named name: String) -> SizeLimit? { profiles.first { $0.name == name } }

    public var description: String { "\(name) (\(bytes) bytes)" }

    /// The limit for one request: under the `http2` profile a VoIP push or a
    /// broadcast may be as large as the `voip` profile allows; otherwise ``bytes``.
    @inlinable public func bytes(for request: NotificationRequest) -> Int {
        isHTTP2 && (request.pushType == .voip || request.isBroadcast) ? 5120 : bytes
    }
}

/// The `reject` policy: a payload over the limit is dropped, saying by how much.
public struct RejectingSizeGuard: SizeGuard {
    public let profile: SizeLimit
    public var limit: Int { profile.bytes }
    public init(limit: SizeLimit) { profile = limit }
    public func enforce(_ envelope: inout Envelope) throws(StageFailure) {
        let limit = profile.bytes(for: envelope.request)
        let size = envelope.payload.count
        if size > limit {
            throw StageFailure("payload is \(size) bytes, \(size - limit) over the limit of \(limit)", code: .payloadTooLarge)
        }
    }
}
