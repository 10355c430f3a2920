import Foundation
import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import Testing

@Suite("Server certificate validity")
struct ServerCertificateTests {
    @Test("a gateway presenting an expired certificate is refused in plain words")
    func expiredServer() async throws {
        let dir = temporaryDirectory()
        let ca = try IssuedCertificate.certificateAuthority(commonName: "Expiry CA")
        try ca.writeCertificate(to: dir + "/ca.pem")
        let old = try IssuedCertificate.issue(commonName: "localhost", hostNames: ["localhost"], purpose: .server, by: ca,
                                              notBefore: -86_400 * 60, notAfter: -86_400)
        try old.writeCertificate(to: dir + "/server.pem")
        try old.writeKey(to: dir + "/server-key.pem")
        // A misconfigured server: it does not check its own certificate's dates.
        var serverConfig = TLSConfiguration(
            role: .server, identity: .pem(certificate: dir + "/server.pem", key: dir + "/server-key.pem"), requireClientCertificate: false)
        serverConfig.checkIdentityDates = false
        let server = try await EchoServer.start(try TLSContext(serverConfig))
        defer { Task { await server.stop() } }
        let client = try TLSContext(.client(identity: nil, trust: .caFile(dir + "/ca.pem")))
        do {
            _ = try await echo([1], port: server.port, context: client, serverName: "localhost")
            Issue.record("an expired server certificate was accepted")
        } catch let e as TLSError {
            #expect(e.code == .expiredCertificate && e.message.contains("expired"), "\(e)")
        }
    }
}
