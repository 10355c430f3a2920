import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `herald simulate` against a provider not written here: the PyPI package
/// `apns3` (a PyAPNs fork), driven by `Tests/Interop/apns3_client.py`.
@Suite("herald simulate against the apns3 client (PyPI)", .serialized)
struct APNs3ClientTests {
    @Test("1,000 notifications, three invalid tokens: apns3 gets status 8 for exactly those identifiers; the simulator took the rest")
    func invalidTokensAnswered() async throws {
        let certs = sharedCertificates
        let python = try await interopPython()
        let invalid = (0..<3).map { i in String(repeating: String(format: "%02x", 0xE0 + i), count: 32) }
        var args = ["simulate", "--certificate", certs.serverCertificate, "--key", certs.serverKey, "--client-ca", certs.caCertificate]
        for t in invalid { args += ["--invalid-token", t] }
        let arguments = args
        let simulator = try await ExternalServer.start(try heraldExecutable().path, arguments)
        let port = simulator.ready["gateway_port"] as! Int
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/apns3_client.py").path
        let output = try await runCommand(python, [
            script, "--host", "127.0.0.1", "--port", "\(port)", "--cert", certs.clientCertificate, "--key", certs.clientKey,
            "--ca", certs.caCertificate, "--server-name", "localhost", "--count", "1000",
            "--invalid", invalid.joined(separator: ","), "--invalid-at", "100,500,900",
        ])
        let summary = await simulator.stop(interrupt: true)
        let line = output.split(separator: "\n").last.map(String.init) ?? ""
        let report = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "apns3 client printed \(output)")
        let errors = (report["errors"] as? [[String: Any]] ?? []).map { ($0["status"] as? Int ?? -1, $0["identifier"] as? Int ?? -1) }
        #expect(errors.map(\.0) == [8, 8, 8], "\(errors)")
        #expect(errors.map(\.1) == [100, 500, 900], "\(errors)")
        #expect(summary["accepted"] as? Int == 997, "\(summary)")
        #expect(summary["rejected"] as? Int == 3, "\(summary)")
    }
}
