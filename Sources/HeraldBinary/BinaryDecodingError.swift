/// Why bytes read from the binary interface are not a valid message.
///
/// Once a decoder has thrown one, the stream cannot be resynchronized (the
/// binary interface has no markers): the connection must be closed.
public struct BinaryDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of garbage was found. Growable: match with `==`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        enum Kind: UInt8 { case unknownCommand, impossibleLength, truncated, unknownItem, duplicateItem, invalidItemLength }
        let kind: Kind
        /// The first byte is not a command this decoder knows.
        public static let unknownCommand = Code(kind: .unknownCommand)
        /// A length field that no valid message can have (a frame longer than five
        /// maximal items, an item running past its frame, an empty feedback token).
        public static let impossibleLength = Code(kind: .impossibleLength)
        /// The stream ended inside a message.
        public static let truncated = Code(kind: .truncated)
        /// A frame item with an id other than 1…5.
        public static let unknownItem = Code(kind: .unknownItem)
        /// A frame item that appears twice.
        public static let duplicateItem = Code(kind: .duplicateItem)
        /// An identifier, expiry or priority item of the wrong size.
        public static let invalidItemLength = Code(kind: .invalidItemLength)
        public var description: String {
            switch kind {
            case .unknownCommand: return "unknown command"
            case .impossibleLength: return "impossible length"
            case .truncated: return "truncated"
            case .unknownItem: return "unknown item"
            case .duplicateItem: return "duplicate item"
            case .invalidItemLength: return "invalid item length"
            }
        }
    }

    public var code: Code
    /// Offset in the stream of the offending bytes: the message's first byte for a bad header, the item's for a bad item.
    public var offset: Int
    /// The message's command byte, when known.
    public var command: UInt8?
    /// The notification identifier, when it could be read before the error.
    public var identifier: UInt32?
    /// What exactly is wrong.
    public var detail: String

    public init(_ code: Code, offset: Int = 0, command: UInt8? = nil, identifier: UInt32? = nil, _ detail: String) {
        self.code = code
        self.offset = offset
        self.command = command
        self.identifier = identifier
        self.detail = detail
    }

    public var description: String { "\(code) at byte \(offset): \(detail)" }
}

/// The result of parsing the start of a byte stream.
public enum ParseResult<Message> {
    /// A complete message of `length` bytes.
    case message(Message, length: Int)
    /// The bytes are a valid beginning; at least `atLeast` bytes in all are needed to go on.
    case needMoreData(atLeast: Int)
}

/// Parses one message of the binary interface at the start of a buffer.
///
/// The contract: never read outside `bytes`; return `.needMoreData` with a
/// lower bound of the message's total size when `bytes` is a strict prefix of
/// a valid message; throw as soon as the bytes seen cannot begin a valid
/// message (with `offset` relative to `bytes`); never allocate in proportion
/// to a length field before the bytes it announces have arrived.
public protocol BinaryMessageParser {
    associatedtype Message
    /// The largest message this parser accepts: what a decoder may have to buffer.
    static var maximumMessageLength: Int { get }
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ParseResult<Message>
}

@inline(__always) @usableFromInline
func load16(_ p: UnsafeRawBufferPointer, _ o: Int) -> Int {
    Int(UInt16(bigEndian: p.loadUnaligned(fromByteOffset: o, as: UInt16.self)))
}

@inline(__always) @usableFromInline
func load32(_ p: UnsafeRawBufferPointer, _ o: Int) -> UInt32 {
    UInt32(bigEndian: p.loadUnaligned(fromByteOffset: o, as: UInt32.self))
}
