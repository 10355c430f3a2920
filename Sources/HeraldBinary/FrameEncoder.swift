import HeraldCore

/// Why a notification cannot be encoded in a binary format.
public struct FrameEncodingError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    @usableFromInline init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Encodes notifications in the binary interface's three formats.
///
/// All integers are big-endian. The field order and sizes are those of the
/// seed documents' listings 5-1 and 5-2 (simple and enhanced) and of the
/// frame format's item table (`docs/protocol.md`):
///
/// | format | bytes |
/// |---|---|
/// | simple (0) | `00` · token length (2) · token · payload length (2) · payload |
/// | enhanced (1) | `01` · identifier (4) · expiry (4) · token length (2) · token · payload length (2) · payload |
/// | frame (2) | `02` · frame length (4) · `01` 32 token · `02` n payload · `03 0004` identifier · `04 0004` expiry · `05 0001` priority |
///
/// The encoder writes into a ``WriteBuffer`` (many frames per write) or into a
/// fresh array of exactly the right size, and reports where the identifier
/// sits so a transport can patch in its per-connection identifier.
public enum FrameEncoder {
    /// The largest token or payload a 16-bit length field can carry.
    public static let maximumFieldLength = Int(UInt16.max)

    /// The encoded size of a notification with `tokenCount` and `payloadCount` bytes.
    @inlinable
    public static func encodedSize(_ format: NotificationFormat, tokenCount: Int, payloadCount: Int) -> Int {
        switch format.command {
        case 0: return 5 + tokenCount + payloadCount
        case 1: return 13 + tokenCount + payloadCount
        default: return 5 + 3 + tokenCount + 3 + payloadCount + 7 + 7 + 4
        }
    }

    /// Where the identifier sits in an encoded notification, or `nil` (simple format).
    @inlinable
    public static func identifierOffset(_ format: NotificationFormat, tokenCount: Int, payloadCount: Int) -> Int? {
        switch format.command {
        case 0: return nil
        case 1: return 1
        default: return 5 + 3 + tokenCount + 3 + payloadCount + 3
        }
    }

    /// Checks what the wire cannot carry: lengths over 65535 bytes, a priority
    /// other than 10 or 5 in the frame format.
    @inlinable
    public static func check(_ format: NotificationFormat, tokenCount: Int, payloadCount: Int, priority: UInt8) throws(FrameEncodingError) {
        if tokenCount > maximumFieldLength { throw FrameEncodingError("device token of \(tokenCount) bytes does not fit a 16-bit length") }
        if payloadCount > maximumFieldLength { throw FrameEncodingError("payload of \(payloadCount) bytes does not fit a 16-bit length") }
        if format.command == 2 && priority != 10 && priority != 5 {
            throw FrameEncodingError("priority \(priority) is not supported by the binary interface (10 or 5)")
        }
    }

    /// Writes one notification at `p`, which must have room for ``encodedSize(_:tokenCount:payloadCount:)`` bytes.
    /// Lengths must have passed ``check(_:tokenCount:payloadCount:priority:)``.
    @inlinable
    public static func write(
        _ format: NotificationFormat, token: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer,
        identifier: UInt32, expiry: UInt32, priority: UInt8, to p: UnsafeMutableRawPointer
    ) {
        let t = token.count
        let n = payload.count
        switch format.command {
        case 0:
            p.storeBytes(of: 0, as: UInt8.self)
            p.storeBytes(of: UInt16(truncatingIfNeeded: t).bigEndian, toByteOffset: 1, as: UInt16.self)
            if t > 0 { (p + 3).copyMemory(from: token.baseAddress!, byteCount: t) }
            p.storeBytes(of: UInt16(truncatingIfNeeded: n).bigEndian, toByteOffset: 3 + t, as: UInt16.self)
            if n > 0 { (p + 5 + t).copyMemory(from: payload.baseAddress!, byteCount: n) }
        case 1:
            p.storeBytes(of: 1, as: UInt8.self)
            p.storeBytes(of: identifier.bigEndian, toByteOffset: 1, as: UInt32.self)
            p.storeBytes(of: expiry.bigEndian, toByteOffset: 5, as: UInt32.self)
            p.storeBytes(of: UInt16(truncatingIfNeeded: t).bigEndian, toByteOffset: 9, as: UInt16.self)
            if t > 0 { (p + 11).copyMemory(from: token.baseAddress!, byteCount: t) }
            p.storeBytes(of: UInt16(truncatingIfNeeded: n).bigEndian, toByteOffset: 11 + t, as: UInt16.self)
            if n > 0 { (p + 13 + t).copyMemory(from: payload.baseAddress!, byteCount: n) }
        default:
            let frameLength = UInt32(truncatingIfNeeded: 3 + t + 3 + n + 7 + 7 + 4)
            p.storeBytes(of: 2, as: UInt8.self)
            p.storeBytes(of: frameLength.bigEndian, toByteOffset: 1, as: UInt32.self)
            var o = 5
            p.storeBytes(of: FrameItem.deviceToken, toByteOffset: o, as: UInt8.self)
            p.storeBytes(of: UInt16(truncatingIfNeeded: t).bigEndian, toByteOffset: o + 1, as: UInt16.self)
            if t > 0 { (p + o + 3).copyMemory(from: token.baseAddress!, byteCount: t) }
            o += 3 + t
            p.storeBytes(of: FrameItem.payload, toByteOffset: o, as: UInt8.self)
            p.storeBytes(of: UInt16(truncatingIfNeeded: n).bigEndian, toByteOffset: o + 1, as: UInt16.self)
            if n > 0 { (p + o + 3).copyMemory(from: payload.baseAddress!, byteCount: n) }
            o += 3 + n
            // identifier, expiry, priority: item id, length 4/4/1, value
            p.storeBytes(of: FrameItem.identifier, toByteOffset: o, as: UInt8.self)
            p.storeBytes(of: UInt16(4).bigEndian, toByteOffset: o + 1, as: UInt16.self)
            p.storeBytes(of: identifier.bigEndian, toByteOffset: o + 3, as: UInt32.self)
            p.storeBytes(of: FrameItem.expiry, toByteOffset: o + 7, as: UInt8.self)
            p.storeBytes(of: UInt16(4).bigEndian, toByteOffset: o + 8, as: UInt16.self)
            p.storeBytes(of: expiry.bigEndian, toByteOffset: o + 10, as: UInt32.self)
            p.storeBytes(of: FrameItem.priority, toByteOffset: o + 14, as: UInt8.self)
            p.storeBytes(of: UInt16(1).bigEndian, toByteOffset: o + 15, as: UInt16.self)
            p.storeBytes(of: priority, toByteOffset: o + 17, as: UInt8.self)
        }
    }

    /// Appends one notification to `buffer` and returns where its identifier
    /// sits in the buffer (`nil` for the simple format).
    ///
    /// - Parameters:
    ///   - format: simple, enhanced or frame.
    ///   - token: the device token's bytes (32 for APNs; others are encoded as given).
    ///   - payload: the compact JSON payload.
    ///   - identifier: the notification identifier (enhanced and frame).
    ///   - expiry: UNIX seconds, 0 = do not store (enhanced and frame).
    ///   - priority: 10 or 5 (frame only; the other formats imply 10).
    @inlinable
    @discardableResult
    public static func encode(
        _ format: NotificationFormat, token: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer,
        identifier: UInt32 = 0, expiry: UInt32 = 0, priority: UInt8 = 10, into buffer: inout WriteBuffer
    ) throws(FrameEncodingError) -> Int? {
        try check(format, tokenCount: token.count, payloadCount: payload.count, priority: priority)
        let size = encodedSize(format, tokenCount: token.count, payloadCount: payload.count)
        let start = buffer.count
        buffer.write(reserving: size) { p in
            write(format, token: token, payload: payload, identifier: identifier, expiry: expiry, priority: priority, to: p)
        }
        return identifierOffset(format, tokenCount: token.count, payloadCount: payload.count).map { start + $0 }
    }

    /// Appends one notification to `buffer`; see ``encode(_:token:payload:identifier:expiry:priority:into:)``.
    @inlinable
    @discardableResult
    public static func encode(
        _ format: NotificationFormat, token: DeviceToken, payload: [UInt8],
        identifier: UInt32 = 0, expiry: UInt32 = 0, priority: UInt8 = 10, into buffer: inout WriteBuffer
    ) throws(FrameEncodingError) -> Int? {
        try check(format, tokenCount: token.count, payloadCount: payload.count, priority: priority)
        let size = encodedSize(format, tokenCount: token.count, payloadCount: payload.count)
        let start = buffer.count
        token.withUnsafeBytes { t in
            payload.withUnsafeBytes { p in
                buffer.write(reserving: size) { out in
                    write(format, token: t, payload: p, identifier: identifier, expiry: expiry, priority: priority, to: out)
                }
            }
        }
        return identifierOffset(format, tokenCount: token.count, payloadCount: payload.count).map { start + $0 }
    }

    /// One notification as a ``Frame`` of exactly its size.
    public static func frame(
        _ format: NotificationFormat, token: DeviceToken, payload: [UInt8],
        identifier: UInt32 = 0, expiry: UInt32 = 0, priority: UInt8 = 10
    ) throws(FrameEncodingError) -> Frame {
        try check(format, tokenCount: token.count, payloadCount: payload.count, priority: priority)
        let size = encodedSize(format, tokenCount: token.count, payloadCount: payload.count)
        // Written into a temporary buffer and copied out: `[UInt8](unsafeUninitializedCapacity:)`
        // looked up the array storage's generic metadata on every call (0.8% of `herald send`
        // on one core), an array made from a buffer does not.
        let bytes = token.withUnsafeBytes { t in
            payload.withUnsafeBytes { p in
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: size) { out in
                    write(format, token: t, payload: p, identifier: identifier, expiry: expiry, priority: priority,
                          to: UnsafeMutableRawPointer(out.baseAddress!))
                    return Array(UnsafeBufferPointer(out))
                }
            }
        }
        return Frame(bytes: bytes, identifierOffset: identifierOffset(format, tokenCount: token.count, payloadCount: payload.count))
    }
}
