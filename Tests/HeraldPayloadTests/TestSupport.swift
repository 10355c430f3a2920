import HeraldCore
import HeraldJSON
import HeraldPayload
import Testing

/// A 32-byte token as hex.
let tokenHex = String(repeating: "ab", count: 32)

/// Decodes a JSON Lines request (without its token; it is added) the way `herald send` does.
func decodeRequest(_ line: String) throws -> NotificationRequest {
    var text = line
    if text.hasPrefix("{") && !text.contains("\"token\"") {
        text = "{\"token\":\"\(tokenHex)\"" + (text == "{}" ? "}" : "," + text.dropFirst())
    }
    return try RequestDecoder().decode(JSONParser.parse(text))
}

/// Builds the payload of a request line; the text, or the dropped reason.
func payloadText(_ line: String) throws -> Result<String, StageFailure> {
    var request = try decodeRequest(line)
    return payloadText(&request)
}

func payloadText(_ request: inout NotificationRequest) -> Result<String, StageFailure> {
    do throws(StageFailure) {
        return .success(String(decoding: try APSPayloadBuilder().build(&request), as: UTF8.self))
    } catch {
        return .failure(error)
    }
}

extension Result {
    var value: Success? { if case .success(let s) = self { return s } else { return nil } }
    var failure: Failure? { if case .failure(let f) = self { return f } else { return nil } }
}

/// A request with the given structured `aps`.
func request(_ aps: APS, custom: JSONObject = JSONObject(), priority: Priority? = nil) -> NotificationRequest {
    NotificationRequest(token: DeviceToken(bytes: [UInt8](repeating: 0xAB, count: 32)), aps: aps, custom: custom, priority: priority)
}
