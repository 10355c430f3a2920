import HeraldBinary

/// The check every decoder fuzz target runs. The input is a byte stream for
/// `Parser`; its first byte chooses where the stream is split between two
/// reads. Invariants: no crash; decoding with feed/next, with the zero-copy
/// read API, split or whole, or fed then read, gives the same messages and the
/// same error; memory held is bounded.
public func fuzzDecoder<Parser: BinaryMessageParser>(_ parser: Parser.Type, _ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let split = bytes.isEmpty ? 0 : Int(data[0]) % (bytes.count + 1)
    let first = Array(bytes[..<split]), second = Array(bytes[split...])
    let whole = decodeNext([bytes], parser)
    let parts = decodeNext([first, second], parser)
    let zeroCopy = decodeRead([first, second], parser)
    let mixed = decodeMixed(first, second, parser)
    precondition(whole.count == parts.count && parts.count == zeroCopy.count && zeroCopy.count == mixed.count, "message counts differ")
    precondition(whole.error == parts.error && parts.error == zeroCopy.error && zeroCopy.error == mixed.error, "errors differ")
    return 0
}

/// What one way of decoding a stream saw.
public struct DecodeOutcome: Equatable {
    public var count = 0
    public var error: BinaryDecodingError?
}

func decodeNext<Parser: BinaryMessageParser>(_ chunks: [[UInt8]], _: Parser.Type) -> DecodeOutcome {
    var d = BinaryStreamDecoder<Parser>()
    var o = DecodeOutcome()
    do {
        for c in chunks {
            d.feed(c)
            while case .message = try d.next() { o.count += 1 }
            precondition(d.bufferedByteCount <= Parser.maximumMessageLength + c.count, "unbounded buffering")
        }
        try d.finish()
    } catch {
        o.error = error
    }
    return o
}

func decodeRead<Parser: BinaryMessageParser>(_ chunks: [[UInt8]], _: Parser.Type) -> DecodeOutcome {
    var d = BinaryStreamDecoder<Parser>()
    var o = DecodeOutcome()
    do {
        for c in chunks {
            try d.read(c) { _ in o.count += 1; return true }
            precondition(d.bufferedByteCount < Parser.maximumMessageLength, "unbounded buffering")
        }
        try d.finish()
    } catch {
        o.error = error
    }
    return o
}

/// Feeds the first part without decoding it, then reads the second zero-copy.
func decodeMixed<Parser: BinaryMessageParser>(_ first: [UInt8], _ second: [UInt8], _: Parser.Type) -> DecodeOutcome {
    var d = BinaryStreamDecoder<Parser>()
    var o = DecodeOutcome()
    do {
        d.feed(first)
        try d.read(second) { _ in o.count += 1; return true }
        try d.finish()
    } catch {
        o.error = error
    }
    return o
}
