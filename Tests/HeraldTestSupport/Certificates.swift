import Foundation
import HeraldTesting

/// A throwaway certificate set (CA, server for "localhost" and 127.0.0.1, client), made once per test process.
public let sharedCertificates: ThrowawayCertificates = {
    try! ThrowawayCertificates.make(in: temporaryDirectory())
}()
