import Foundation
import HeraldTesting

/// A fresh temporary directory.
public func temporaryDirectory() -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("herald-tls-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A throwaway certificate set (CA, server for "localhost" and 127.0.0.1, client), made once per test process.
public let sharedCertificates: ThrowawayCertificates = {
    try! ThrowawayCertificates.make(in: temporaryDirectory())
}()
