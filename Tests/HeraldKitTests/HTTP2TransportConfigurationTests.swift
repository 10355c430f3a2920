import HeraldCore
import HeraldJSON
import HeraldHTTP2Transport
@testable import HeraldKit
import HeraldTestSupport
import Testing

@Suite("The HTTP/2 transport's section of the configuration")
struct HTTP2TransportConfigurationTests {
    static func transport(_ extra: String) throws -> HTTP2TransportConfiguration {
        let json = """
            {"type": "http2", "host": "127.0.0.1", "port": 8443, "certificate": "\(sharedCertificates.clientCertificate)",
             "key": "\(sharedCertificates.clientKey)", "caFile": "\(sharedCertificates.caCertificate)"\(extra)}
            """
        guard case .object(let o) = try JSONParser.parse(json) else { throw ConfigError(file: "test", key: "", message: "not an object") }
        return try HTTP2TransportFactory.configuration(ConfigNode(file: "herald.json", path: "transport", object: o))
    }

    @Test("fastLaneConnection: on unless given; false turns it off; a value that is not a boolean is an error naming the key")
    func fastLaneConnection() throws {
        #expect(try Self.transport("").fastLaneConnection)
        #expect(try Self.transport(#", "fastLaneConnection": true"#).fastLaneConnection)
        #expect(try !Self.transport(#", "fastLaneConnection": false"#).fastLaneConnection)
        #expect {
            _ = try Self.transport(#", "fastLaneConnection": "yes""#)
        } throws: { error in
            "\(error)".contains("fastLaneConnection")
        }
    }
}
