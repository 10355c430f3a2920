import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

/// A PostgreSQL of its own with TLS on (the throwaway certificates: "localhost" and
/// 127.0.0.1, signed by their CA), where the role `herald_tls` may log in over TLS only.
private let tlsCluster: Result<PostgresCluster, any Error> = Result {
    let certs = sharedCertificates
    let cluster = try PostgresCluster(extraOptions: "-c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key") { data in
        try FileManager.default.copyItem(atPath: certs.serverCertificate, toPath: data + "/server.crt")
        try FileManager.default.copyItem(atPath: certs.serverKey, toPath: data + "/server.key")
        chmod(data + "/server.key", 0o600)
        try """
        local all all trust
        hostnossl all postgres 127.0.0.1/32 trust
        hostssl all herald_tls 127.0.0.1/32 trust
        """.write(toFile: data + "/pg_hba.conf", atomically: false, encoding: .utf8)
    }
    atexit { try? tlsCluster.get().stop() }
    _ = try cluster.psqlBlocking("postgres", "CREATE ROLE herald_tls LOGIN SUPERUSER")
    return cluster
}

@Suite("The queue over TLS to PostgreSQL", .serialized, .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct QueueTLSTests {
    @Test("verify-full with the CA: enqueue and work over TLS (the role may log in over TLS only); every row done once")
    func verified() async throws {
        let cluster = try tlsCluster.get()
        let db = try await cluster.createDatabase()
        let config = try configurationFile(cluster, db, user: "herald_tls", extra: #","tls":"verify-full","caFile":"\#(sharedCertificates.caCertificate)""#)
        let file = try temporaryFile(requestLines(1000).lines.joined(separator: "\n") + "\n")
        let enqueue = try await runHerald(["enqueue", "--config", config, file])
        #expect(enqueue.status == 0, "\(enqueue.stderr)")
        let work = try await runHerald(["work", "--config", config, "--drain"])
        #expect(work.status == 0, "\(work.stderr)")
        await #expect(try tally(cluster, db) == ["done|accepted": 1000])
        // With the server's name given as it is in the certificate, too.
        let named = try configurationFile(cluster, db, user: "herald_tls", extra: #","tls":"verify-full","caFile":"\#(sharedCertificates.caCertificate)","serverName":"localhost""#)
        let again = try await runHerald(["work", "--config", named, "--drain"])
        #expect(again.status == 0, "\(again.stderr)")
    }

    // A wrong serverName is not tried here: swift-nio-ssl accepts a certificate whose IP address
    // entry matches the address connected to (127.0.0.1 is in the throwaway one) whatever the name.
    @Test("refused, with a reason naming the database: a CA that did not sign the server (the system's roots), and plain TCP where the server demands TLS")
    func refused() async throws {
        let cluster = try tlsCluster.get()
        let db = try await cluster.createDatabase()
        let cases: [(String, String)] = [
            (#","tls":"verify-full""#, "certificate"),
            (#","tls":"disable""#, "no encryption"),
        ]
        for (tls, reason) in cases {
            let config = try configurationFile(cluster, db, user: "herald_tls", extra: tls)
            let r = try await runHerald(["work", "--config", config, "--drain"])
            #expect(r.status != 0, "\(tls): \(r.stderr)")
            #expect(r.stderr.contains("postgres://herald_tls@127.0.0.1:\(cluster.port)/\(db)"), "\(tls): \(r.stderr)")
            #expect(r.stderr.lowercased().contains(reason), "\(tls): \(r.stderr)")
        }
    }
}
