/// Protocol Buffers' wire format, the few parts an OTLP export request needs (issue 31): varints,
/// fixed 64-bit numbers, length-delimited strings, bytes and nested messages, appended to one
/// growing buffer. Herald writes notification spans with it rather than through SwiftProtobuf's
/// generated messages (`docs/architecture.md`, "Notification spans": a message object per span
/// was most of tracing's cost).
///
/// The bytes go into memory of its own by plain stores (no array's checks per byte: a span is
/// some thirty fields). A writer is not meant to be copied: copies share that memory.
///
/// A nested message's length goes before it but is known only after it: ``message(_:_:)`` leaves
/// one byte, writes the body and, when the length needs more than one byte (127 and up), moves
/// the body along to make room.
struct ProtobufWriter {
    /// Owns the memory (freed with the last writer sharing it).
    private final class Storage {
        var base: UnsafeMutableRawPointer
        init(capacity: Int) { base = .allocate(byteCount: capacity, alignment: 8) }
        deinit { base.deallocate() }
    }
    private let storage: Storage
    private var base: UnsafeMutableRawPointer
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int = 256) {
        let c = max(64, capacity)
        storage = Storage(capacity: c)
        base = storage.base
        self.capacity = c
    }

    /// What was written, as an array.
    var bytes: [UInt8] { Array(written) }
    /// What was written (valid until the next write).
    var written: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Forgets what was written, keeping the memory.
    mutating func removeAll() { count = 0 }

    @inline(__always) mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(count + n) }
    }

    @inline(never) private mutating func grow(_ needed: Int) {
        let c = max(needed, capacity * 2)
        let new = UnsafeMutableRawPointer.allocate(byteCount: c, alignment: 8)
        new.copyMemory(from: base, byteCount: count)
        storage.base.deallocate()
        storage.base = new
        base = new
        capacity = c
    }

    @inline(__always) mutating func byte(_ b: UInt8) {
        reserve(1)
        base.storeBytes(of: b, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always) mutating func append(_ raw: UnsafeRawBufferPointer) {
        guard let from = raw.baseAddress, raw.count > 0 else { return }
        reserve(raw.count)
        (base + count).copyMemory(from: from, byteCount: raw.count)
        count += raw.count
    }

    mutating func append(_ bytes: some Collection<UInt8>) {
        if bytes.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) != nil { return }
        for b in bytes { byte(b) }
    }

    @inline(__always) mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// 8 bytes of `value`, most significant first.
    @inline(__always) mutating func appendBigEndian(_ value: UInt64) {
        reserve(8)
        (base + count).storeBytes(of: value.bigEndian, as: UInt64.self)
        count += 8
    }

    /// 8 bytes of `value`, most significant first, over those at `offset` (already written).
    @inline(__always) mutating func setBigEndian(_ value: UInt64, at offset: Int) {
        precondition(offset >= 0 && offset + 8 <= count)
        (base + offset).storeBytes(of: value.bigEndian, as: UInt64.self)
    }

    enum Wire: UInt8 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
    }

    @inline(__always) mutating func varint(_ value: UInt64) {
        reserve(10)
        var v = value
        var at = count
        while v >= 0x80 {
            base.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: at, as: UInt8.self)
            v >>= 7
            at += 1
        }
        base.storeBytes(of: UInt8(v), toByteOffset: at, as: UInt8.self)
        count = at + 1
    }

    @inline(__always) mutating func tag(_ field: Int, _ wire: Wire) {
        let t = UInt64(field) << 3 | UInt64(wire.rawValue)
        if t < 0x80 { byte(UInt8(t)) } else { varint(t) }
    }

    mutating func string(_ field: Int, _ value: String) {
        Self.withUTF8(value) { u in
            tag(field, .lengthDelimited)
            varint(UInt64(u.count))
            append(u)
        }
    }

    mutating func bytes(_ field: Int, _ value: some Collection<UInt8>) {
        tag(field, .lengthDelimited)
        varint(UInt64(value.count))
        append(value)
    }

    /// 8 bytes, most significant first (an id's bytes in the order its hex writes them).
    @inline(__always) mutating func bigEndian(_ field: Int, _ value: UInt64) {
        tag(field, .lengthDelimited)
        byte(8)
        appendBigEndian(value)
    }

    @inline(__always) mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, .fixed64)
        reserve(8)
        (base + count).storeBytes(of: value.littleEndian, as: UInt64.self)
        count += 8
    }

    @inline(__always) mutating func uint(_ field: Int, _ value: UInt64) {
        tag(field, .varint)
        varint(value)
    }

    /// An `int64` field: a negative number as its two's complement (ten bytes).
    mutating func int(_ field: Int, _ value: Int64) {
        uint(field, UInt64(bitPattern: value))
    }

    /// A nested message: `body` writes its fields.
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        let mark = open(field)
        body(&self)
        close(mark)
    }

    /// Starts a nested message whose fields are written next; ``close(_:)`` with what this
    /// returns writes its length (``message(_:_:)`` without a closure).
    @inline(__always) mutating func open(_ field: Int) -> Int {
        tag(field, .lengthDelimited)
        let mark = count
        byte(0)
        return mark
    }

    /// Ends the nested message ``open(_:)`` started at `mark`.
    mutating func close(_ mark: Int) {
        let length = count - mark - 1
        if length < 0x80 {
            base.storeBytes(of: UInt8(length), toByteOffset: mark, as: UInt8.self)
            return
        }
        let size = Self.size(ofVarint: UInt64(length))
        reserve(size - 1)
        // The body moves along (the regions overlap: copyMemory moves).
        (base + mark + size).copyMemory(from: base + mark + 1, byteCount: length)
        count = mark
        varint(UInt64(length))
        count += length
    }

    /// The length of a varint.
    @inline(__always) static func size(ofVarint value: UInt64) -> Int {
        var v = value
        var n = 1
        while v >= 0x80 {
            v >>= 7
            n += 1
        }
        return n
    }
}

extension ProtobufWriter {
    /// A string field whose text is `prefix` then `rest` (a span's name, `herald.` and a stage's).
    mutating func string(_ field: Int, _ prefix: StaticString, _ rest: String) {
        Self.withUTF8(rest) { u in
            tag(field, .lengthDelimited)
            varint(UInt64(prefix.utf8CodeUnitCount + u.count))
            append(prefix)
            append(u)
        }
    }

    /// A string's UTF-8 where it is (no copy of the string, so no reference counted for a native
    /// one), or from a copy made contiguous.
    @inline(__always) static func withUTF8(_ text: String, _ body: (UnsafeRawBufferPointer) -> Void) {
        if text.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) != nil { return }
        var copy = text
        copy.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    /// The start of OpenTelemetry's `KeyValue` (its key, the value's frame) whose `AnyValue`
    /// holds `any` bytes; lengths worked out before they are written (nothing moves).
    @inline(__always) private mutating func keyValue(_ field: Int, _ key: StaticString, any: Int) {
        let k = key.utf8CodeUnitCount
        let kv = 1 + Self.size(ofVarint: UInt64(k)) + k + 1 + Self.size(ofVarint: UInt64(any)) + any
        tag(field, .lengthDelimited)
        varint(UInt64(kv))
        tag(1, .lengthDelimited)
        varint(UInt64(k))
        append(key)
        tag(2, .lengthDelimited)
        varint(UInt64(any))
    }

    /// `KeyValue` with a string value (`AnyValue.string_value`).
    mutating func attribute(_ field: Int, _ key: StaticString, _ value: String) {
        Self.withUTF8(value) { v in
            keyValue(field, key, any: 1 + Self.size(ofVarint: UInt64(v.count)) + v.count)
            tag(1, .lengthDelimited)
            varint(UInt64(v.count))
            append(v)
        }
    }

    /// `KeyValue` with a string value known at compile time.
    mutating func attribute(_ field: Int, _ key: StaticString, _ value: StaticString) {
        let n = value.utf8CodeUnitCount
        keyValue(field, key, any: 1 + Self.size(ofVarint: UInt64(n)) + n)
        tag(1, .lengthDelimited)
        varint(UInt64(n))
        append(value)
    }

    /// `KeyValue` with an `int_value`.
    mutating func attribute(_ field: Int, _ key: StaticString, _ value: Int64) {
        keyValue(field, key, any: 1 + Self.size(ofVarint: UInt64(bitPattern: value)))
        int(3, value)
    }

    /// `KeyValue` with a `bool_value`.
    mutating func attribute(_ field: Int, _ key: StaticString, _ value: Bool) {
        keyValue(field, key, any: 2)
        uint(2, value ? 1 : 0)
    }

    /// `KeyValue` with a string value, its key not known when built (a resource's attributes).
    mutating func attribute(_ field: Int, key: String, _ value: String) {
        message(field) { kv in
            kv.string(1, key)
            kv.message(2) { $0.string(1, value) }
        }
    }
}
