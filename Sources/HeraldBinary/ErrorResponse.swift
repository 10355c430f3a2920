import HeraldCore

/// The gateway's error-response packet: `|8|status (1)|identifier (4)|`,
/// written just before APNs closes the connection.
///
/// For every status but 10 the identifier names the notification that
/// failed; everything written after it on that connection was discarded. For
/// status 10 (shutdown) it names the *last notification that succeeded*.
/// Unknown statuses are kept as their number (``Status`` is open).
public struct ErrorResponse: Sendable, Hashable, CustomStringConvertible {
    /// The command byte, 8.
    public static let command: UInt8 = 8
    /// The packet's size, 6.
    public static let length = 6

    public var status: Status
    public var identifier: UInt32

    public init(status: Status, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    /// The packet's bytes.
    public var bytes: [UInt8] {
        var b = [UInt8](repeating: 0, count: 6)
        b[0] = Self.command
        b[1] = status.byte
        b[2] = UInt8(truncatingIfNeeded: identifier >> 24)
        b[3] = UInt8(truncatingIfNeeded: identifier >> 16)
        b[4] = UInt8(truncatingIfNeeded: identifier >> 8)
        b[5] = UInt8(truncatingIfNeeded: identifier)
        return b
    }

    /// Appends the packet to `buffer`.
    public func encode(into buffer: inout WriteBuffer) {
        bytes.withUnsafeBytes { buffer.append($0) }
    }

    public var description: String { "error response: status \(status.rawValue) (\(status)), identifier \(identifier)" }
}

/// Parses error-response packets (the provider's side of the gateway connection).
public enum ErrorResponseParser: BinaryMessageParser {
    public static var maximumMessageLength: Int { ErrorResponse.length }
    public static func parse(_ b: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ParseResult<ErrorResponse> {
        guard b.count >= 1 else { return .needMoreData(atLeast: 1) }
        guard b[0] == ErrorResponse.command else {
            throw BinaryDecodingError(.unknownCommand, command: b[0], "command \(b[0]) is not an error response (8)")
        }
        guard b.count >= 6 else { return .needMoreData(atLeast: 6) }
        return .message(ErrorResponse(status: Status(rawValue: b[1]), identifier: load32(b, 2)), length: 6)
    }
}

/// The feedback service's tuples: `|timestamp (4)|token length (2)|token|`.
public enum FeedbackTuple {
    /// Appends one tuple for `entry`. Tokens longer than 65535 bytes cannot be encoded.
    public static func encode(_ entry: FeedbackEntry, into buffer: inout WriteBuffer) throws(FrameEncodingError) {
        let t = entry.token.count
        guard t > 0, t <= 65535 else { throw FrameEncodingError("feedback token of \(t) bytes cannot be encoded") }
        entry.token.withUnsafeBytes { token in
            buffer.write(reserving: 6 + t) { p in
                p.storeBytes(of: entry.timestamp.bigEndian, as: UInt32.self)
                p.storeBytes(of: UInt16(t).bigEndian, toByteOffset: 4, as: UInt16.self)
                (p + 6).copyMemory(from: token.baseAddress!, byteCount: t)
            }
        }
    }

    /// The tuples of `entries`, back to back.
    public static func bytes(_ entries: [FeedbackEntry]) -> [UInt8] {
        var buffer = WriteBuffer(capacity: entries.count * 38 + 16)
        for e in entries { try? encode(e, into: &buffer) }
        return buffer.bytes
    }
}

/// Parses feedback tuples. A token length of 0 is impossible and rejected.
public enum FeedbackParser: BinaryMessageParser {
    public static var maximumMessageLength: Int { 6 + 65535 }
    public static func parse(_ b: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ParseResult<FeedbackEntry> {
        guard b.count >= 6 else { return .needMoreData(atLeast: 6) }
        let t = load16(b, 4)
        guard t > 0 else { throw BinaryDecodingError(.impossibleLength, "feedback tuple with an empty token") }
        guard b.count >= 6 + t else { return .needMoreData(atLeast: 6 + t) }
        let entry = FeedbackEntry(token: DeviceToken(copying: UnsafeRawBufferPointer(rebasing: b[6..<6 + t])), timestamp: load32(b, 0))
        return .message(entry, length: 6 + t)
    }
}
