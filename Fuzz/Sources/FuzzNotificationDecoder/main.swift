import HeraldBinary

/// libFuzzer entry: the input is a byte stream for `NotificationParser`. The first byte
/// chooses where the stream is split between two reads. Invariants checked:
/// no crash; decoding with feed/next, with the zero-copy read API, split or
/// whole, or fed then read, gives the same messages and the same error; memory held is bounded.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let split = bytes.isEmpty ? 0 : Int(data[0]) % (bytes.count + 1)
    let whole = decodeNext([bytes])
    let parts = decodeNext([Array(bytes[..<split]), Array(bytes[split...])])
    let zeroCopy = decodeRead([Array(bytes[..<split]), Array(bytes[split...])])
    let mixed = decodeMixed(Array(bytes[..<split]), Array(bytes[split...]))
    precondition(whole.count == parts.count && parts.count == zeroCopy.count && zeroCopy.count == mixed.count, "message counts differ")
    precondition(whole.error == parts.error && parts.error == zeroCopy.error && zeroCopy.error == mixed.error, "errors differ")
    return 0
}

struct Outcome {
    var count = 0
    var error: BinaryDecodingError?
}

func decodeNext(_ chunks: [[UInt8]]) -> Outcome {
    var d = BinaryStreamDecoder<NotificationParser>()
    var o = Outcome()
    do {
        for c in chunks {
            d.feed(c)
            while case .message = try d.next() { o.count += 1 }
            precondition(d.bufferedByteCount <= NotificationParser.maximumMessageLength + c.count, "unbounded buffering")
        }
        try d.finish()
    } catch {
        o.error = error
    }
    return o
}

func decodeRead(_ chunks: [[UInt8]]) -> Outcome {
    var d = BinaryStreamDecoder<NotificationParser>()
    var o = Outcome()
    do {
        for c in chunks {
            try d.read(c) { _ in o.count += 1; return true }
            precondition(d.bufferedByteCount < NotificationParser.maximumMessageLength, "unbounded buffering")
        }
        try d.finish()
    } catch {
        o.error = error
    }
    return o
}

/// Feeds the first part without decoding it, then reads the second zero-copy.
func decodeMixed(_ first: [UInt8], _ second: [UInt8]) -> Outcome {
    var d = BinaryStreamDecoder<NotificationParser>()
    var o = Outcome()
    do {
        d.feed(first)
        try d.read(second) { _ in o.count += 1; return true }
        try d.finish()
    } catch {
        o.error = error
    }
    return o
}
