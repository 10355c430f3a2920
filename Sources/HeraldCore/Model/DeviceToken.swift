import HeraldJSON

/// A device token: the opaque bytes APNs hands to an app at registration.
///
/// Tokens travel as bytes; hex is only their text form. Up to 32 bytes (the
/// size APNs has always issued) are stored inline, with no allocation, so a
/// request can be copied between stages cheaply; longer tokens fall back to an
/// array. `description` is redacted: a full token is never logged.
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline var w0: UInt64 = 0
    @usableFromInline var w1: UInt64 = 0
    @usableFromInline var w2: UInt64 = 0
    @usableFromInline var w3: UInt64 = 0
    @usableFromInline var overflow: [UInt8]? = nil
    /// Number of bytes in the token.
    public private(set) var count: Int = 0

    /// The size of the tokens APNs issues, and the only size the binary interface accepts.
    public static let standardLength = 32

    /// A well-spread 64-bit digest of the token, the same in every process (unlike
    /// `hashValue`, seeded per process): for spreading tokens over shards, a few
    /// multiplications where `hashValue` ran SipHash (a tenth of a microsecond a request).
    /// Not for anything an attacker could aim at.
    package var spreadKey: UInt64 {
        @inline(__always) func mix(_ h: UInt64, _ w: UInt64) -> UInt64 {
            let m = (h ^ w) &* 0x9E37_79B9_7F4A_7C15
            return m ^ (m >> 29)
        }
        guard let overflow else { return mix(mix(mix(mix(UInt64(count), w0), w1), w2), w3) }
        var h = UInt64(count)
        for b in overflow { h = mix(h, UInt64(b)) }
        return h
    }

    /// The empty token (no bytes): a broadcast's, or a request's before it is decoded.
    package init() {}

    /// Creates a token from its bytes.
    public init<C: Collection>(bytes: C) where C.Element == UInt8 {
        count = bytes.count
        if count > 32 {
            overflow = Array(bytes)
            return
        }
        var tuple = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &tuple) { raw in
            var i = 0
            for b in bytes { raw[i] = b; i += 1 }
        }
        (w0, w1, w2, w3) = tuple
    }

    /// Creates a token from raw bytes (such as a view into a frame being
    /// decoded): one copy, no generic iteration.
    public init(copying raw: UnsafeRawBufferPointer) {
        count = raw.count
        if count > 32 {
            overflow = Array(raw)
            return
        }
        var tuple = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        if count > 0 {
            Swift.withUnsafeMutableBytes(of: &tuple) { $0.baseAddress!.copyMemory(from: raw.baseAddress!, byteCount: raw.count) }
        }
        (w0, w1, w2, w3) = tuple
    }

    /// Parses a token from hex text: case-insensitive, an even number of hex
    /// digits and nothing else, at most 512 bytes.
    public init(hex: some StringProtocol) throws(TokenError) {
        let parsed = hex.utf8.withContiguousStorageIfAvailable { utf8 in
            Result { () throws(TokenError) in try DeviceToken(hexUTF8: UnsafeRawBufferPointer(utf8)) }
        } ?? Array(hex.utf8).withUnsafeBytes { raw in
            Result { () throws(TokenError) in try DeviceToken(hexUTF8: raw) }
        }
        self = try parsed.get()
    }

    /// Decodes hex digits straight into the inline words (an array only for a token over 32 bytes).
    init(hexUTF8 utf8: UnsafeRawBufferPointer) throws(TokenError) {
        if utf8.isEmpty { throw TokenError(.empty) }
        if utf8.count % 2 != 0 { throw TokenError(.oddLength(utf8.count)) }
        if utf8.count > 1024 { throw TokenError(.tooLong(utf8.count / 2)) }
        let n = utf8.count / 2
        if n > 32 {
            switch Hex.decode(utf8) {
            case .success(let bytes): overflow = bytes
            case .failure(let e): throw TokenError(.notHex(offset: e.offset))
            }
            count = n
            return
        }
        var tuple = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let failure = Swift.withUnsafeMutableBytes(of: &tuple) { Hex.decode(utf8, into: $0) }
        if let failure { throw TokenError(.notHex(offset: failure.offset)) }
        (w0, w1, w2, w3) = tuple
        count = n
    }

    /// Calls `body` with the token's bytes.
    @inlinable
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let overflow { return try overflow.withUnsafeBytes(body) }
        var tuple = (w0, w1, w2, w3)
        let n = count
        return try Swift.withUnsafeBytes(of: &tuple) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }

    /// The token's bytes as an array.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// Lowercase hex of the whole token. Do not log it: use ``redacted``.
    public var hex: String {
        withUnsafeBytes { Hex.string($0) }
    }

    /// `prefix` and the hex digits, in one string (a request's `:path`).
    package func hex(after prefix: StaticString) -> String {
        withUnsafeBytes { Hex.string($0, after: prefix) }
    }

    /// The first and last four hex digits, for logs: `a1b2…e9f0`.
    public var redacted: String {
        let h = hex
        guard h.count > 8 else { return String(repeating: "•", count: h.count) }
        return "\(h.prefix(4))…\(h.suffix(4))"
    }

    public var description: String { redacted }
}

/// Why a device token could not be parsed.
public struct TokenError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        case empty
        case oddLength(Int)
        case notHex(offset: Int)
        case tooLong(Int)
    }
    public let kind: Kind
    init(_ kind: Kind) { self.kind = kind }

    public var description: String {
        switch kind {
        case .empty: return "device token is empty"
        case .oddLength(let n): return "device token has an odd number of hex digits (\(n))"
        case .notHex(let offset): return "device token has a non-hex character at offset \(offset)"
        case .tooLong(let n): return "device token is too long (\(n) bytes)"
        }
    }
}
