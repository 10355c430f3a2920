/// What a decoder made of the bytes it has so far.
public enum DecodingStep<Message> {
    /// One complete message; call again for the next.
    case message(Message)
    /// The buffered bytes are a valid beginning; feed more.
    case needMoreData
}

/// A streaming decoder for one kind of binary interface message, after
/// SwiftNIO's `ByteToMessageDecoder` but without depending on NIO.
///
/// Bytes may arrive split at any byte and many messages per read. Two ways to use it:
/// - **feed / next** (owned messages): ``feed(_:)-([UInt8])`` what was read,
///   then call ``next()`` until it returns ``DecodingStep/needMoreData``.
/// - **read** (zero copy): ``read(_:_:)`` parses straight out of the caller's
///   buffer and copies only an incomplete tail, so messages such as
///   ``NotificationView`` that point into the bytes can be used during the call.
///
/// At the end of the stream call ``finish()``: bytes left over are a
/// truncated message, a ``BinaryDecodingError`` with code `.truncated`.
/// After any error the decoder stays failed and rethrows it: the binary
/// interface cannot resynchronize, the connection has to go.
///
/// Memory is bounded: the decoder holds at most one incomplete message
/// (``BinaryMessageParser/maximumMessageLength``, checked from the length
/// fields before the bytes are awaited) plus what was fed and not yet decoded.
///
/// ```swift
/// var decoder = BinaryStreamDecoder<ErrorResponseParser>()
/// decoder.feed(bytesFromSocket)
/// while case .message(let response) = try decoder.next() { handle(response) }
/// ```
public struct BinaryStreamDecoder<Parser: BinaryMessageParser> {
    @usableFromInline var pending: [UInt8] = []
    @usableFromInline var readerIndex = 0
    /// Stream offset of `pending[0]`.
    @usableFromInline var base = 0
    @usableFromInline var failure: BinaryDecodingError?

    @inlinable public init() {}

    /// Bytes received and not yet decoded.
    @inlinable public var bufferedByteCount: Int { pending.count - readerIndex }
    /// Bytes of the stream consumed by complete messages so far.
    @inlinable public var consumedByteCount: Int { base + readerIndex }
    /// The error the decoder failed with, if it did.
    public var error: BinaryDecodingError? { failure }

    /// Adds bytes read from the stream.
    @inlinable
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        compact()
        pending.append(contentsOf: bytes)
    }

    /// Adds bytes read from the stream.
    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    @usableFromInline
    mutating func compact() {
        guard readerIndex > 0 else { return }
        if readerIndex == pending.count {
            pending.removeAll(keepingCapacity: true)
        } else {
            pending.removeSubrange(0..<readerIndex)
        }
        base += readerIndex
        readerIndex = 0
    }

    @usableFromInline
    mutating func fail(_ e: BinaryDecodingError, at streamOffset: Int) -> BinaryDecodingError {
        var e = e
        e.offset += streamOffset
        failure = e
        return e
    }

    /// The next complete message among the bytes fed so far.
    ///
    /// With a view parser the message points into the decoder's buffer and is
    /// valid only until the next mutating call; prefer ``read(_:_:)`` there.
    @inlinable
    public mutating func next() throws(BinaryDecodingError) -> DecodingStep<Parser.Message> {
        if let failure { throw failure }
        guard readerIndex < pending.count else { return .needMoreData }
        let start = readerIndex
        let result = pending.withUnsafeBytes { raw in
            Result { () throws(BinaryDecodingError) in try Parser.parse(UnsafeRawBufferPointer(rebasing: raw[start...])) }
        }
        switch result {
        case .failure(let e): throw fail(e, at: base + start)
        case .success(.needMoreData): return .needMoreData
        case .success(.message(let m, let length)):
            readerIndex += length
            return .message(m)
        }
    }

    /// Decodes every complete message in the buffered bytes followed by
    /// `input`, calling `body` with each, in order, without copying `input`
    /// (only an incomplete tail is kept for the next call). `body` returns
    /// `false` to stop; `read` then returns `false` and the rest of `input` is
    /// not looked at (the caller is closing the stream).
    @inlinable @discardableResult
    public mutating func read(_ input: UnsafeRawBufferPointer, _ body: (Parser.Message) -> Bool) throws(BinaryDecodingError) -> Bool {
        if let failure { throw failure }
        var i = 0
        if readerIndex < pending.count {
            compact()
            // Messages begun (or fed) earlier: finish them, taking from `input` only what they need.
            // `old` counts the buffered bytes that did not come from `input`.
            var old = pending.count
            while !pending.isEmpty {
                let result = pending.withUnsafeBytes { raw in
                    Result { () throws(BinaryDecodingError) in try Parser.parse(raw) }
                }
                switch result {
                case .failure(let e): throw fail(e, at: base)
                case .success(.needMoreData(let atLeast)):
                    if i == input.count { return true }
                    let take = min(max(atLeast - pending.count, 1), input.count - i)
                    pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<i + take]))
                    i += take
                case .success(.message(let m, let length)):
                    base += length
                    if length <= old {
                        // Wholly made of earlier bytes: drop them and look again.
                        pending.removeSubrange(0..<length)
                        old -= length
                        if pending.isEmpty { i = 0 }
                    } else {
                        // Ends inside `input`: carry on straight from `input`.
                        i = length - old
                        old = 0
                        pending.removeAll(keepingCapacity: true)
                    }
                    if !body(m) { return false }
                    if old == 0 && !pending.isEmpty {
                        // Only bytes copied from `input` are left: parse them from `input` instead.
                        i -= pending.count
                        pending.removeAll(keepingCapacity: true)
                    }
                }
            }
        } else if !pending.isEmpty {
            compact()
        }
        while i < input.count {
            let step: ParseResult<Parser.Message>
            do {
                step = try Parser.parse(UnsafeRawBufferPointer(rebasing: input[i...]))
            } catch {
                throw fail(error, at: base)
            }
            switch step {
            case .needMoreData:
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i...]))
                return true
            case .message(let m, let length):
                i += length
                base += length
                if !body(m) { return false }
            }
        }
        return true
    }

    /// Decodes every complete message in `input` (after anything buffered); see ``read(_:_:)``.
    @discardableResult
    public mutating func read(_ input: [UInt8], _ body: (Parser.Message) -> Bool) throws(BinaryDecodingError) -> Bool {
        let r = input.withUnsafeBytes { raw in
            Result { () throws(BinaryDecodingError) in try read(raw, body) }
        }
        return try r.get()
    }

    /// The stream ended: throws `.truncated` if a message was begun and not completed.
    public mutating func finish() throws(BinaryDecodingError) {
        if let failure { throw failure }
        let left = bufferedByteCount
        guard left > 0 else { return }
        let command = pending[readerIndex]
        throw fail(
            BinaryDecodingError(.truncated, command: command, "stream ended \(left) bytes into a message"),
            at: base + readerIndex)
    }
}

/// Decodes notifications of all three formats into owned values (the gateway's side).
public typealias NotificationDecoder = BinaryStreamDecoder<NotificationParser>
/// Decodes notifications as zero-copy views (the simulator's hot path).
public typealias NotificationViewDecoder = BinaryStreamDecoder<NotificationViewParser>
/// Decodes error-response packets (the provider's side of a gateway connection).
public typealias ErrorResponseDecoder = BinaryStreamDecoder<ErrorResponseParser>
/// Decodes feedback tuples (the provider's side of a feedback connection).
public typealias FeedbackDecoder = BinaryStreamDecoder<FeedbackParser>

extension BinaryStreamDecoder: Sendable {}
