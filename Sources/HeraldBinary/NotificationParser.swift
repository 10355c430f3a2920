import HeraldCore

/// A notification as read off the wire, without copying: the token and
/// payload point into the decoder's or the caller's buffer and are valid only
/// during the call that hands the view out.
///
/// Fields a format does not carry are `nil` (the simple format has no
/// identifier; a frame may leave out any item).
public struct NotificationView {
    /// 0, 1 or 2.
    public var command: UInt8
    /// The token bytes, `nil` if absent (a frame without item 1).
    public var token: UnsafeRawBufferPointer?
    /// The payload bytes, `nil` if absent (a frame without item 2).
    public var payload: UnsafeRawBufferPointer?
    public var identifier: UInt32?
    public var expiry: UInt32?
    public var priority: UInt8?
    /// The size of the whole notification on the wire.
    public var length: Int

    @inlinable
    public init(command: UInt8, token: UnsafeRawBufferPointer?, payload: UnsafeRawBufferPointer?, identifier: UInt32?, expiry: UInt32?, priority: UInt8?, length: Int) {
        self.command = command
        self.token = token
        self.payload = payload
        self.identifier = identifier
        self.expiry = expiry
        self.priority = priority
        self.length = length
    }

    /// The format (parsed views are always 0, 1 or 2; any other command is named by its number).
    public var format: NotificationFormat {
        NotificationFormat.command(command) ?? NotificationFormat(command: command, name: "command \(command)")
    }

    /// The priority in force: the frame's item, or 10 (formats 0 and 1 imply it, as does a frame without item 5).
    public var effectivePriority: UInt8 { priority ?? 10 }

    /// An owned copy.
    public var decoded: DecodedNotification {
        DecodedNotification(
            format: format, token: token.map { Array($0) }, payload: payload.map { Array($0) },
            identifier: identifier, expiry: expiry, priority: priority)
    }
}

/// A notification as read off the wire, owning its bytes.
public struct DecodedNotification: Sendable, Hashable {
    public var format: NotificationFormat
    public var token: [UInt8]?
    public var payload: [UInt8]?
    public var identifier: UInt32?
    public var expiry: UInt32?
    public var priority: UInt8?

    public init(format: NotificationFormat, token: [UInt8]?, payload: [UInt8]?, identifier: UInt32? = nil, expiry: UInt32? = nil, priority: UInt8? = nil) {
        self.format = format
        self.token = token
        self.payload = payload
        self.identifier = identifier
        self.expiry = expiry
        self.priority = priority
    }
}

/// Parses notifications in any of the three formats (the gateway's side),
/// handing out zero-copy ``NotificationView``s.
///
/// Structural garbage is an error: an unknown command, a frame longer than
/// five maximal items, an item running past its frame, an unknown or repeated
/// item, an identifier/expiry/priority item of the wrong size. What the
/// gateway reports with a status (a missing or wrong-sized token, a missing
/// or oversized payload) is *not* a decoding error: those decode, and the
/// validator decides.
public enum NotificationViewParser: BinaryMessageParser {
    /// The largest frame data: five items of maximal length.
    public static let maximumFrameDataLength = 5 * (3 + 65535)
    public static var maximumMessageLength: Int { 5 + maximumFrameDataLength }

    @inlinable
    public static func parse(_ b: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ParseResult<NotificationView> {
        guard b.count >= 1 else { return .needMoreData(atLeast: 1) }
        let command = b[0]
        switch command {
        case 0:
            guard b.count >= 3 else { return .needMoreData(atLeast: 3) }
            let t = load16(b, 1)
            guard b.count >= 5 + t else { return .needMoreData(atLeast: 5 + t) }
            let n = load16(b, 3 + t)
            let total = 5 + t + n
            guard b.count >= total else { return .needMoreData(atLeast: total) }
            let view = NotificationView(
                command: 0, token: UnsafeRawBufferPointer(rebasing: b[3..<3 + t]),
                payload: UnsafeRawBufferPointer(rebasing: b[5 + t..<total]), identifier: nil, expiry: nil, priority: nil, length: total)
            return .message(view, length: total)
        case 1:
            guard b.count >= 11 else { return .needMoreData(atLeast: 11) }
            let t = load16(b, 9)
            guard b.count >= 13 + t else { return .needMoreData(atLeast: 13 + t) }
            let n = load16(b, 11 + t)
            let total = 13 + t + n
            guard b.count >= total else { return .needMoreData(atLeast: total) }
            let view = NotificationView(
                command: 1, token: UnsafeRawBufferPointer(rebasing: b[11..<11 + t]),
                payload: UnsafeRawBufferPointer(rebasing: b[13 + t..<total]),
                identifier: load32(b, 1), expiry: load32(b, 5), priority: nil, length: total)
            return .message(view, length: total)
        case 2:
            guard b.count >= 5 else { return .needMoreData(atLeast: 5) }
            let frameLength = Int(load32(b, 1))
            guard frameLength <= maximumFrameDataLength else {
                throw BinaryDecodingError(.impossibleLength, command: 2, "frame length \(frameLength) exceeds \(maximumFrameDataLength), five maximal items")
            }
            let total = 5 + frameLength
            guard b.count >= total else { return .needMoreData(atLeast: total) }
            return .message(try parseItems(b, end: total), length: total)
        default:
            throw BinaryDecodingError(.unknownCommand, command: command, "command \(command) is not a notification (0, 1 or 2)")
        }
    }

    @usableFromInline
    static func parseItems(_ b: UnsafeRawBufferPointer, end: Int) throws(BinaryDecodingError) -> NotificationView {
        var view = NotificationView(command: 2, token: nil, payload: nil, identifier: nil, expiry: nil, priority: nil, length: end)
        var seen: UInt8 = 0
        var o = 5
        while o < end {
            guard end - o >= 3 else {
                throw BinaryDecodingError(.impossibleLength, offset: o, command: 2, identifier: view.identifier, "item header cut by the end of the frame")
            }
            let item = b[o]
            let length = load16(b, o + 1)
            let data = o + 3
            guard length <= end - data else {
                throw BinaryDecodingError(.impossibleLength, offset: o, command: 2, identifier: view.identifier, "item \(item) of \(length) bytes runs past the end of the frame")
            }
            guard item >= 1 && item <= 5 else {
                throw BinaryDecodingError(.unknownItem, offset: o, command: 2, identifier: view.identifier, "unknown item \(item)")
            }
            let bit: UInt8 = 1 << item
            guard seen & bit == 0 else {
                throw BinaryDecodingError(.duplicateItem, offset: o, command: 2, identifier: view.identifier, "item \(item) appears twice")
            }
            seen |= bit
            switch item {
            case FrameItem.deviceToken: view.token = UnsafeRawBufferPointer(rebasing: b[data..<data + length])
            case FrameItem.payload: view.payload = UnsafeRawBufferPointer(rebasing: b[data..<data + length])
            case FrameItem.identifier, FrameItem.expiry:
                guard length == 4 else {
                    throw BinaryDecodingError(.invalidItemLength, offset: o, command: 2, identifier: view.identifier, "item \(item) must be 4 bytes, got \(length)")
                }
                if item == FrameItem.identifier { view.identifier = load32(b, data) } else { view.expiry = load32(b, data) }
            default:
                guard length == 1 else {
                    throw BinaryDecodingError(.invalidItemLength, offset: o, command: 2, identifier: view.identifier, "priority item must be 1 byte, got \(length)")
                }
                view.priority = b[data]
            }
            o = data + length
        }
        return view
    }
}

/// Parses notifications into owned ``DecodedNotification`` values.
public enum NotificationParser: BinaryMessageParser {
    public static var maximumMessageLength: Int { NotificationViewParser.maximumMessageLength }
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ParseResult<DecodedNotification> {
        switch try NotificationViewParser.parse(bytes) {
        case .message(let v, let length): return .message(v.decoded, length: length)
        case .needMoreData(let n): return .needMoreData(atLeast: n)
        }
    }
}
