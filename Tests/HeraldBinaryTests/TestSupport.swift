import HeraldBinary
import HeraldCore
import HeraldSimulator
import Synchronization

/// A token whose bytes are 0, 1, 2… 31 plus `seed`.
func token(_ seed: UInt8 = 0, count: Int = 32) -> DeviceToken {
    DeviceToken(bytes: (0..<count).map { UInt8(truncatingIfNeeded: $0 + Int(seed)) })
}

let tokenHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

func hex(_ b: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(b.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
}

func unhex(_ s: String) -> [UInt8] {
    let clean = Array(s.filter { !$0.isWhitespace }.utf8)
    return stride(from: 0, to: clean.count, by: 2).map { UInt8(String(decoding: clean[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

/// Encodes one notification into fresh bytes.
func encode(
    _ format: NotificationFormat, token t: DeviceToken = token(), payload: [UInt8] = bytes(#"{"aps":{}}"#),
    id: UInt32 = 0, expiry: UInt32 = 0, priority: UInt8 = 10
) -> [UInt8] {
    var buffer = WriteBuffer(capacity: 16)
    try! FrameEncoder.encode(format, token: t, payload: payload, identifier: id, expiry: expiry, priority: priority, into: &buffer)
    return buffer.bytes
}

/// A frame (command 2) built item by item, for malformed-frame tests.
func rawFrame(_ items: [(UInt8, [UInt8])], lengthAdjust: Int = 0) -> [UInt8] {
    var data: [UInt8] = []
    for (id, value) in items {
        data.append(id)
        data += [UInt8(value.count >> 8), UInt8(value.count & 0xFF)]
        data += value
    }
    let n = UInt32(data.count + lengthAdjust)
    return [2, UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)] + data
}

func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }

/// Decodes everything with feed/next, feeding the given chunks.
func decodeAll<P: BinaryMessageParser>(_ parser: P.Type, chunks: [[UInt8]]) throws(BinaryDecodingError) -> [P.Message] {
    var d = BinaryStreamDecoder<P>()
    var out: [P.Message] = []
    for c in chunks {
        d.feed(c)
        while case .message(let m) = try d.next() { out.append(m) }
    }
    try d.finish()
    return out
}

/// Decodes everything with the zero-copy read API, feeding the given chunks.
func readAll<P: BinaryMessageParser>(_ parser: P.Type, chunks: [[UInt8]]) throws(BinaryDecodingError) -> [P.Message] {
    var d = BinaryStreamDecoder<P>()
    var out: [P.Message] = []
    for c in chunks { try d.read(c) { out.append($0); return true } }
    try d.finish()
    return out
}

