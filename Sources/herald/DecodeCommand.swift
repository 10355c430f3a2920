import ArgumentParser
import HeraldBinary
import HeraldCore
import HeraldJSON
#if canImport(Glibc)
import Glibc
#endif

/// `herald decode`: binary-interface bytes to JSON Lines, for debugging.
struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode notification frames, error responses or feedback tuples (hex or raw) into JSON Lines.",
        discussion: """
            Input is hex (one or more messages per line; blank lines skipped) or raw bytes; --input auto \
            takes it as hex when the first bytes read are all hex digits and white space. With --kind auto, \
            each message's first byte decides: 0, 1, 2 a notification, 8 an error response, anything else \
            a feedback tuple (whose first byte is the top of a timestamp). Garbage prints \
            {"type":"error",…} naming the offset, and the exit code is 1; in hex mode the next line carries on.

            Examples:
              herald decode captured.hex
              herald decode --input raw --kind error-response response.bin
            """
    )

    @Argument(help: "A file, or - for standard input.")
    var input: String = "-"

    @Option(help: "What the bytes are.")
    var kind: MessageKind = .auto

    @Option(name: .customLong("input"), help: "How the input is written.")
    var encoding: InputEncoding = .auto

    func run() throws {
        let fd: Int32 = input == "-" ? 0 : open(input, O_RDONLY)
        if fd < 0 { throw SetupError("cannot read \(input): \(String(cString: strerror(errno)))") }
        defer { if fd != 0 { close(fd) } }

        var session = DecodeSession(kind: kind)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var mode: String? = encoding == .auto ? nil : encoding.rawValue
        var line: [UInt8] = []
        var lineNumber = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SetupError("cannot read \(input): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            let bytes = chunk[0..<n]
            if mode == nil { mode = bytes.allSatisfy { DecodeSession.isHexOrSpace($0) } ? "hex" : "raw" }
            if mode == "raw" {
                try session.feedRaw(Array(bytes))
                continue
            }
            for b in bytes {
                if b == 0x0A {
                    lineNumber += 1
                    try session.decodeHexLine(line, number: lineNumber)
                    line.removeAll(keepingCapacity: true)
                } else if line.count < 1 << 24 {
                    line.append(b)
                }
            }
        }
        if mode == "hex" {
            if !line.isEmpty { lineNumber += 1; try session.decodeHexLine(line, number: lineNumber) }
        } else {
            session.finishRaw()
        }
        try session.flush()
        if session.errors > 0 { throw ExitCode(1) }
    }
}

enum MessageKind: String, CaseIterable, ExpressibleByArgument {
    case auto, notification, errorResponse = "error-response", feedback
}

/// One message of any kind the binary interface carries.
enum AnyBinaryMessage {
    case notification(DecodedNotification)
    case errorResponse(ErrorResponse)
    case feedback(FeedbackEntry)
}

/// Parses by the first byte: 0/1/2 notification, 8 error response, else feedback tuple.
enum AutoParser: BinaryMessageParser {
    static var maximumMessageLength: Int { NotificationParser.maximumMessageLength }
    static func parse(_ b: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ParseResult<AnyBinaryMessage> {
        guard b.count >= 1 else { return .needMoreData(atLeast: 1) }
        switch b[0] {
        case 0, 1, 2: return map(try NotificationParser.parse(b), AnyBinaryMessage.notification)
        case 8: return map(try ErrorResponseParser.parse(b), AnyBinaryMessage.errorResponse)
        default: return map(try FeedbackParser.parse(b), AnyBinaryMessage.feedback)
        }
    }
    static func map<M>(_ r: ParseResult<M>, _ f: (M) -> AnyBinaryMessage) -> ParseResult<AnyBinaryMessage> {
        switch r {
        case .message(let m, let length): return .message(f(m), length: length)
        case .needMoreData(let n): return .needMoreData(atLeast: n)
        }
    }
}

enum FixedParser<P: BinaryMessageParser>: BinaryMessageParser {
    static var maximumMessageLength: Int { P.maximumMessageLength }
    static func parse(_ b: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ParseResult<AnyBinaryMessage> {
        switch try P.parse(b) {
        case .message(let m, let length):
            switch m {
            case let n as DecodedNotification: return .message(.notification(n), length: length)
            case let r as ErrorResponse: return .message(.errorResponse(r), length: length)
            case let f as FeedbackEntry: return .message(.feedback(f), length: length)
            default: fatalError("unsupported message type")
            }
        case .needMoreData(let n): return .needMoreData(atLeast: n)
        }
    }
}

/// Decodes and prints; counts errors.
struct DecodeSession {
    let kind: MessageKind
    var decoder: AnyDecoder
    var out = JSONWriter(capacity: 1 << 16)
    var errors = 0

    init(kind: MessageKind) {
        self.kind = kind
        decoder = AnyDecoder(kind)
    }

    enum AnyDecoder {
        case auto(BinaryStreamDecoder<AutoParser>)
        case notification(BinaryStreamDecoder<FixedParser<NotificationParser>>)
        case errorResponse(BinaryStreamDecoder<FixedParser<ErrorResponseParser>>)
        case feedback(BinaryStreamDecoder<FixedParser<FeedbackParser>>)
        init(_ kind: MessageKind) {
            switch kind {
            case .auto: self = .auto(.init())
            case .notification: self = .notification(.init())
            case .errorResponse: self = .errorResponse(.init())
            case .feedback: self = .feedback(.init())
            }
        }
        mutating func read(_ bytes: [UInt8], _ body: (AnyBinaryMessage) -> Void) throws(BinaryDecodingError) {
            switch self {
            case .auto(var d): defer { self = .auto(d) }; try d.read(bytes) { body($0); return true }
            case .notification(var d): defer { self = .notification(d) }; try d.read(bytes) { body($0); return true }
            case .errorResponse(var d): defer { self = .errorResponse(d) }; try d.read(bytes) { body($0); return true }
            case .feedback(var d): defer { self = .feedback(d) }; try d.read(bytes) { body($0); return true }
            }
        }
        mutating func finish() throws(BinaryDecodingError) {
            switch self {
            case .auto(var d): defer { self = .auto(d) }; try d.finish()
            case .notification(var d): defer { self = .notification(d) }; try d.finish()
            case .errorResponse(var d): defer { self = .errorResponse(d) }; try d.finish()
            case .feedback(var d): defer { self = .feedback(d) }; try d.finish()
            }
        }
    }

    static func isHexOrSpace(_ b: UInt8) -> Bool {
        Hex.nibble(b) != nil || b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09
    }

    mutating func feedRaw(_ bytes: [UInt8]) throws(IOError) {
        var printed: [AnyBinaryMessage] = []
        do {
            try decoder.read(bytes) { printed.append($0) }
            printed.forEach { print($0) }
        } catch {
            printed.forEach { print($0) }
            report(error, line: nil)
        }
        if out.bytes.count > 1 << 16 { try flush() }
    }

    mutating func finishRaw() {
        do { try decoder.finish() } catch { report(error, line: nil) }
    }

    mutating func decodeHexLine(_ line: [UInt8], number: Int) throws(IOError) {
        let text = line.filter { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }
        if text.isEmpty { return }
        guard text.count % 2 == 0, text.allSatisfy(Self.isHexOrSpace) else {
            errors += 1
            out.raw("{\"type\":\"error\",\"line\":")
            out.int(number)
            out.raw(",\"error\":\"not an even number of hex digits\"}\n")
            return
        }
        guard case .success(let bytes) = Hex.decode(text) else { return }  // checked above
        decoder = AnyDecoder(kind)
        var printed: [AnyBinaryMessage] = []
        do {
            try decoder.read(bytes) { printed.append($0) }
            try decoder.finish()
            printed.forEach { print($0) }
        } catch {
            printed.forEach { print($0) }
            report(error, line: number)
        }
        if out.bytes.count > 1 << 16 { try flush() }
    }

    mutating func report(_ e: BinaryDecodingError, line: Int?) {
        errors += 1
        out.raw("{\"type\":\"error\"")
        if let line { out.raw(",\"line\":"); out.int(line) }
        out.raw(",\"offset\":"); out.int(e.offset)
        out.raw(",\"code\":"); out.string(e.code.description)
        if let c = e.command { out.raw(",\"command\":"); out.int(Int(c)) }
        if let i = e.identifier { out.raw(",\"identifier\":"); out.int(Int(i)) }
        out.raw(",\"error\":"); out.string(e.detail)
        out.raw("}\n")
    }

    mutating func print(_ m: AnyBinaryMessage) {
        switch m {
        case .notification(let n):
            out.raw("{\"type\":\"notification\",\"format\":")
            out.string(n.format.name)
            out.raw(",\"command\":"); out.int(Int(n.format.command))
            if let i = n.identifier { out.raw(",\"identifier\":"); out.int(Int(i)) }
            if let e = n.expiry { out.raw(",\"expiry\":"); out.int(Int(e)) }
            if let p = n.priority { out.raw(",\"priority\":"); out.int(Int(p)) }
            if let t = n.token { out.raw(",\"token\":"); out.string(DeviceToken(bytes: t).hex) }
            if let p = n.payload {
                out.raw(",\"payload_bytes\":"); out.int(p.count)
                let valid = p.withUnsafeBytes { (try? JSONParser.validate($0)) != nil }
                if valid, let v = try? JSONParser.parse(p) {
                    out.raw(",\"payload\":"); out.value(v)
                } else {
                    out.raw(",\"payload_text\":"); out.string(String(decoding: p, as: UTF8.self))
                }
            }
            out.raw("}\n")
        case .errorResponse(let r):
            out.raw("{\"type\":\"error-response\",\"status\":"); out.int(Int(r.status.rawValue))
            out.raw(",\"reason\":"); out.string(r.status.description)
            out.raw(",\"identifier\":"); out.int(Int(r.identifier))
            out.raw("}\n")
        case .feedback(let f):
            out.raw("{\"type\":\"feedback\",\"timestamp\":"); out.int(Int(f.timestamp))
            out.raw(",\"token\":"); out.string(f.token.hex)
            out.raw("}\n")
        }
    }

    mutating func flush() throws(IOError) { try writeAll(1, &out.bytes, to: "standard output") }
}
