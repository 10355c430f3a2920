import Foundation
import HeraldOpenSSL
import HeraldTestSupport
import HeraldTesting
import Testing

@Suite("TLS contexts from bad files")
struct TLSContextTests {
    let certs = sharedCertificates

    /// Files that are not a PEM CA certificate, as users get them wrong.
    func badCAFiles() throws -> [String: String] {
        let dir = temporaryDirectory()
        var files: [String: String] = ["missing": dir + "/nope.pem"]
        let empty = dir + "/empty.pem"
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        files["empty"] = empty
        let text = dir + "/text.pem"
        try "not a certificate\n".write(toFile: text, atomically: true, encoding: .utf8)
        files["text"] = text
        let der = dir + "/ca.der"
        let pem = try String(contentsOfFile: certs.caCertificate, encoding: .utf8)
        let base64 = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        #expect(FileManager.default.createFile(atPath: der, contents: Data(base64Encoded: base64)))
        files["DER"] = der
        files["a key"] = certs.clientKey
        return files
    }

    @Test("a bad caFile is a clear error naming the file, never a crash (client and server)")
    func badCAFile() throws {
        for (what, path) in try badCAFiles() {
            do {
                _ = try TLSContext(.client(identity: .pem(certificate: certs.clientCertificate, key: certs.clientKey), trust: .caFile(path)))
                Issue.record("\(what): accepted as a CA file")
            } catch {
                #expect(error.description.contains(path), "\(what): \(error)")
            }
            do {
                _ = try TLSContext(.server(identity: .pem(certificate: certs.serverCertificate, key: certs.serverKey), clientCA: .caFile(path)))
                Issue.record("\(what): accepted as a client CA file")
            } catch {
                #expect(error.description.contains(path), "\(what): \(error)")
            }
        }
    }
}
