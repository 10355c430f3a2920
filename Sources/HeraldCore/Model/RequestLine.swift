import HeraldJSON

/// One request's line of JSON text, as every source reads it (a JSON Lines
/// file, a database row, an HTTP body): the text without a byte-order mark
/// or blanks, and the request decoded, or what is wrong with it with its id
/// and token when they can be read (so the outcome can name them).
package enum RequestLine {
    /// The request text of line `n`: without the UTF-8 byte-order mark some
    /// editors put at the start of line 1; nil for a blank line.
    package static func content(line n: Int, _ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var bytes = bytes
        if n == 1, bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            bytes = UnsafeRawBufferPointer(rebasing: bytes[3...])
        }
        return bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) ? nil : bytes
    }

    /// One request's JSON text, decoded: the request, or what is wrong with it
    /// and its id and token when they can be read (shared with sources that
    /// hold request lines elsewhere, such as a database table).
    package enum Decoded {
        case request(NotificationRequest)
        case invalid(reason: String, id: UInt32?, token: DeviceToken?)
    }

    /// Decodes one request's JSON text (a JSON Lines line without its newline).
    package static func decode(_ bytes: UnsafeRawBufferPointer, decoder: RequestDecoder) -> Decoded {
        var request = NotificationRequest.blank
        if let bad = decode(bytes, decoder: decoder, into: &request) { return .invalid(reason: bad.reason, id: bad.id, token: bad.token) }
        return .request(request)
    }

    /// ``decode(_:decoder:)`` into `r`, a ``NotificationRequest/blank`` request where it is to
    /// stay (an envelope in a batch): nil when `r` holds the request, else what is wrong with
    /// the line (`r` then part written, to be discarded).
    package static func decode(_ bytes: UnsafeRawBufferPointer, decoder: RequestDecoder, into r: inout NotificationRequest) -> (reason: String, id: UInt32?, token: DeviceToken?)? {
        do {
            try decoder.decode(line: bytes, into: &r)
            return nil
        } catch {
            let hint = salvage(bytes)
            return (error.message, hint.id, hint.token)
        }
    }

    /// The id and token of a line that failed to decode, if they can be read, so the outcome can name them.
    static func salvage(_ bytes: UnsafeRawBufferPointer) -> (id: UInt32?, token: DeviceToken?) {
        guard case .object(let o)? = try? JSONParser.parse(bytes) else { return (nil, nil) }
        let id = o["id"]?.numberValue?.intValue.flatMap { UInt32(exactly: $0) }
        let token = o["token"]?.stringValue.flatMap { try? DeviceToken(hex: $0) }
        return (id, token)
    }
}
