import HeraldCore
import HeraldJSON

/// The `truncate` policy: a payload over the limit gets its alert text
/// shortened until it fits.
///
/// The contract:
/// - Fields are shortened in the order given (by default only the body):
///   a later field is touched only when the earlier ones, cut down to "…"
///   alone, still leave the payload over the limit.
/// - The field that makes it fit becomes the longest prefix of its text that
///   ends on a grapheme-cluster boundary, followed by "…", such that the whole
///   payload is at most `limit` bytes. Sizes count the bytes JSON escaping adds
///   (a quote is 2 bytes, a control character up to 6), so the result is never
///   over the limit, and one more grapheme cluster would not fit.
/// - Sizes are computed from the escaped sizes of the fields (a payload's size
///   changes by exactly the change in a string's escaped size), never by
///   re-encoding per attempt. When one field of a structured request changes,
///   the builder reports where its text sits (``APSPayloadBuilder/textOffset(of:in:)``)
///   and "…" is spliced in place of the cut-off bytes (the kept prefix's escaped
///   bytes are already there); otherwise the payload is built once more, after the cut.
/// - If the payload is still over with every field at "…" (the shortest
///   shortened text: an empty prefix and the mark), or there is no text to
///   shorten, the request is dropped, saying by how many bytes.
public struct TruncatingSizeGuard: SizeGuard {
    public let profile: SizeLimit
    public var limit: Int { profile.bytes }
    /// The fields to shorten, in order.
    public let fields: [TruncatableField]
    let builder: APSPayloadBuilder

    public init(limit: SizeLimit, fields: [TruncatableField] = [.body], builder: APSPayloadBuilder = APSPayloadBuilder()) {
        profile = limit
        self.fields = fields
        self.builder = builder
    }

    public func enforce(_ envelope: inout Envelope) throws(StageFailure) {
        try enforce(&envelope, fresh: false)
    }

    /// `fresh`: the payload was just rebuilt from the request here, so sizes derived from it are right.
    func enforce(_ envelope: inout Envelope, fresh: Bool) throws(StageFailure) {
        let limit = profile.bytes(for: envelope.request)
        let size = envelope.payload.count
        guard size > limit else { return }
        var over = size - limit
        // Decided from escaped sizes alone, applied only once the payload is known to fit:
        // `cut` is the field cut to a prefix (at most one), `minimal` the fields before it, cut to "…".
        var minimal: [TruncatableField] = []
        var cut: (field: TruncatableField, text: String, escapedPrefix: Int, escapedOld: Int)?
        for field in fields {
            guard let text = field.text(in: envelope.request) else { continue }
            let escaped = JSONWriter.escapedSize(of: text)
            guard escaped > TextTruncation.ellipsisSize else { continue }  // "…" would not save anything
            if escaped - TextTruncation.ellipsisSize >= over {
                let (prefix, escapedPrefix) = TextTruncation.cut(text, budget: escaped - over - TextTruncation.ellipsisSize)
                cut = (field, TextTruncation.appendingEllipsis(prefix), escapedPrefix, escaped)
                over = 0
                break
            }
            minimal.append(field)
            over -= escaped - TextTruncation.ellipsisSize
        }
        guard over == 0 else {
            let names = fields.map(\.name).joined(separator: ", ")
            let how = minimal.isEmpty ? "and has no alert text (\(names)) to shorten" : "even with the alert text (\(names)) shortened to \"…\""
            throw StageFailure("payload is \(size) bytes, \(size - limit) over the limit of \(limit), \(how): \(over) bytes over", code: .payloadTooLarge)
        }
        if minimal.isEmpty, let cut, let start = APSPayloadBuilder.textOffset(of: cut.field, in: envelope.request),
            Self.isString(at: start, length: cut.escapedOld, in: envelope.payload)
        {
            // One field changes: its escaped prefix is already in the payload; drop the rest, add "…".
            envelope.payload.replaceSubrange((start + cut.escapedPrefix)..<(start + cut.escapedOld), with: Self.ellipsisBytes)
            cut.field.setText(cut.text, in: &envelope.request)
        } else {
            var request = envelope.request
            for field in minimal { field.setText(TextTruncation.ellipsis, in: &request) }
            if let cut { cut.field.setText(cut.text, in: &request) }
            let payload = try builder.build(&request)
            if payload.count > limit && !fresh {
                // The payload was not the builder's for this request (a custom stage changed one of
                // them): the sizes above were off. Build it afresh and decide again, once.
                envelope.payload = try builder.build(&envelope.request)
                return try enforce(&envelope, fresh: true)
            }
            envelope.payload = payload
            envelope.request = request
        }
        guard envelope.payload.count <= limit else {
            // Cannot happen when the sizes above are right; never send over the limit regardless.
            throw StageFailure("payload is \(envelope.payload.count) bytes after truncation, over the limit of \(limit)", code: .payloadTooLarge)
        }
    }

    static let ellipsisBytes: [UInt8] = Array(TextTruncation.ellipsis.utf8)

    /// Whether `payload` has a string's quotes around `start..<start + length`: the payload is the
    /// builder's for this request (a custom stage may have changed one without the other; then the
    /// payload is rebuilt rather than spliced).
    static func isString(at start: Int, length: Int, in payload: [UInt8]) -> Bool {
        start >= 1 && start + length < payload.count
            && payload[start - 1] == UInt8(ascii: "\"") && payload[start + length] == UInt8(ascii: "\"")
    }
}
