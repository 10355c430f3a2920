import HeraldCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The little file access catalog loading needs, without Foundation.
enum FileSystem {
    struct Entry {
        var name: String
        var isDirectory: Bool
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    /// Reads a whole file.
    static func readFile(_ path: String, limit: Int = 64 << 20) throws(CatalogError) -> [UInt8] {
        do {
            return try readSmallFile(path, limit: limit)
        } catch {
            let reason = error.code == EFBIG ? "larger than \(limit >> 20) MiB" : "cannot read: \(String(cString: strerror(error.code)))"
            throw CatalogError(file: path, message: reason)
        }
    }

    /// Why `path` cannot be read, or `nil` when it can.
    static func accessProblem(_ path: String) -> String? {
        access(path, R_OK) == 0 ? nil : errnoText()
    }

    /// Whether `path` is a directory.
    static func isDirectory(_ path: String) -> Bool {
        guard let d = opendir(path) else { return false }
        closedir(d)
        return true
    }

    /// The entries of a directory (without `.` and `..`), sorted by name.
    static func list(_ path: String) throws(CatalogError) -> [Entry] {
        guard let d = opendir(path) else { throw CatalogError(file: path, message: "cannot open directory: \(errnoText())") }
        defer { closedir(d) }
        var out: [Entry] = []
        while let e = readdir(d) {
            let name = withUnsafePointer(to: &e.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            let type = e.pointee.d_type
            let full = path.hasSuffix("/") ? path + name : path + "/" + name
            let isDir: Bool
            if type == UInt8(DT_DIR) {
                isDir = true
            } else if type == UInt8(DT_REG) {
                isDir = false
            } else {
                isDir = isDirectory(full)
            }
            out.append(Entry(name: name, isDirectory: isDir))
        }
        return out.sorted { $0.name < $1.name }
    }
}
