import HeraldCore

/// The binary interface's notification formats.
public struct NotificationFormat: Sendable, Hashable, CustomStringConvertible {
    public let command: UInt8
    public let name: String
    init(command: UInt8, name: String) {
        self.command = command
        self.name = name
    }
    /// Command 0: token and payload only.
    public static let simple = NotificationFormat(command: 0, name: "simple")
    /// Command 1: adds identifier and expiry.
    public static let enhanced = NotificationFormat(command: 1, name: "enhanced")
    /// Command 2: items, adds priority.
    public static let frame = NotificationFormat(command: 2, name: "frame")
    public static let all: [NotificationFormat] = [.simple, .enhanced, .frame]
    public static func named(_ name: String) -> NotificationFormat? { all.first { $0.name == name } }
    public var description: String { name }
}

/// Encodes notifications in one of the binary interface's formats.
public struct BinaryFramer: Framer {
    public let format: NotificationFormat
    public init(format: NotificationFormat = .frame) { self.format = format }

    public func frame(_ envelope: Envelope) throws(StageFailure) -> Frame {
        let request = envelope.request
        let token = request.token
        let payload = envelope.payload
        guard token.count > 0 else { throw StageFailure("missing device token") }
        guard token.count <= Int(UInt16.max), payload.count <= Int(UInt16.max) else {
            throw StageFailure("token or payload too long for the binary interface")
        }
        let id = request.id ?? UInt32(truncatingIfNeeded: envelope.sequence)
        let expiry = request.expiry ?? 0
        var out: [UInt8] = []
        switch format.command {
        case 0:
            out.reserveCapacity(5 + token.count + payload.count)
            out.append(0)
            Self.append16(UInt16(token.count), &out)
            token.withUnsafeBytes { out.append(contentsOf: $0) }
            Self.append16(UInt16(payload.count), &out)
            out.append(contentsOf: payload)
            return Frame(bytes: out, identifierOffset: nil)
        case 1:
            out.reserveCapacity(13 + token.count + payload.count)
            out.append(1)
            Self.append32(id, &out)
            Self.append32(expiry, &out)
            Self.append16(UInt16(token.count), &out)
            token.withUnsafeBytes { out.append(contentsOf: $0) }
            Self.append16(UInt16(payload.count), &out)
            out.append(contentsOf: payload)
            return Frame(bytes: out, identifierOffset: 1)
        default:
            let priority = request.priority ?? .immediately
            let itemsLength = 3 + token.count + 3 + payload.count + 3 + 4 + 3 + 4 + 3 + 1
            out.reserveCapacity(5 + itemsLength)
            out.append(2)
            Self.append32(UInt32(itemsLength), &out)
            out.append(1); Self.append16(UInt16(token.count), &out); token.withUnsafeBytes { out.append(contentsOf: $0) }
            out.append(2); Self.append16(UInt16(payload.count), &out); out.append(contentsOf: payload)
            out.append(3); Self.append16(4, &out)
            let idOffset = out.count
            Self.append32(id, &out)
            out.append(4); Self.append16(4, &out); Self.append32(expiry, &out)
            out.append(5); Self.append16(1, &out); out.append(priority.rawValue)
            return Frame(bytes: out, identifierOffset: idOffset)
        }
    }

    @inline(__always) static func append16(_ v: UInt16, _ out: inout [UInt8]) {
        out.append(UInt8(v >> 8)); out.append(UInt8(v & 0xFF))
    }
    @inline(__always) static func append32(_ v: UInt32, _ out: inout [UInt8]) {
        out.append(UInt8(v >> 24)); out.append(UInt8((v >> 16) & 0xFF)); out.append(UInt8((v >> 8) & 0xFF)); out.append(UInt8(v & 0xFF))
    }
}
