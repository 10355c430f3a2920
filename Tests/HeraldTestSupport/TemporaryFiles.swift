import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fresh temporary directory, under ``temporaryRoot``.
public func temporaryDirectory() -> String {
    let path = temporaryRoot + "/" + UUID().uuidString
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// The directory this test process's temporary directories are made in, removed when the process
/// exits (each directory used to stay in /tmp: thousands after a few hundred runs). Roots left by
/// test processes that were killed are removed when the next one starts.
let temporaryRoot: String = {
    let prefix = "herald-tests-"
    let fm = FileManager.default
    let base = fm.temporaryDirectory.path
    for name in (try? fm.contentsOfDirectory(atPath: base)) ?? [] where name.hasPrefix(prefix) {
        guard let pid = Int32(name.dropFirst(prefix.count)), kill(pid, 0) != 0, errno == ESRCH else { continue }
        try? fm.removeItem(atPath: base + "/" + name)
    }
    let path = base + "/" + prefix + "\(getpid())"
    try? fm.createDirectory(atPath: path, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: temporaryRoot) }
    return path
}()

/// A temporary file holding `text`, in a directory of its own.
public func temporaryFile(_ text: String, suffix: String = ".jsonl") throws -> String {
    let path = temporaryDirectory() + "/file" + suffix
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}
