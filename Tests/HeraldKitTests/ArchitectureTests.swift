import Foundation
import HeraldTestSupport
import Testing

/// `docs/architecture.md` says what each module depends on, in its module
/// table and its graph; the sources' `import` lines say what it really does.
/// These tests hold the two together, so the floors keep pointing down.
@Suite("docs/architecture.md's module table and graph match the sources' imports")
struct ArchitectureTests {
    /// The table's short names for Herald's modules (other names are libraries: not checked here).
    static let shortNames: [String: String] = [
        "core": "HeraldCore", "JSON": "HeraldJSON", "payload": "HeraldPayload", "localization": "HeraldLocalization",
        "binary": "HeraldBinary", "simulator": "HeraldSimulator", "OpenSSL": "HeraldOpenSSL", "gateway": "HeraldGateway",
        "HTTP/2": "HeraldHTTP2", "HTTP/2 transport": "HeraldHTTP2Transport", "testing": "HeraldTesting", "recorder": "HeraldRecorder",
        "store": "HeraldStore", "kit": "HeraldKit", "client": "HeraldClient", "service": "HeraldService", "postgres": "HeraldPostgres",
        "benchmarks": "HeraldBenchmarks", "tracing": "HeraldTracing",
    ]

    static var document: String {
        get throws { try String(contentsOf: repositoryRoot().appendingPathComponent("docs/architecture.md"), encoding: .utf8) }
    }

    /// Each Swift module under Sources/ and the Herald modules its files import.
    static func imports() throws -> [String: Set<String>] {
        let sources = repositoryRoot().appendingPathComponent("Sources")
        let pattern = try NSRegularExpression(pattern: #"^\s*(?:@\w+\s+)*(?:(?:public|package|internal)\s+)?import\s+(Herald\w+)"#, options: .anchorsMatchLines)
        var result: [String: Set<String>] = [:]
        for module in try FileManager.default.contentsOfDirectory(atPath: sources.path) where !module.hasPrefix("C") {
            var found = Set<String>()
            let files = FileManager.default.enumerator(atPath: sources.appendingPathComponent(module).path)?.compactMap { $0 as? String } ?? []
            for file in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: sources.appendingPathComponent(module).appendingPathComponent(file), encoding: .utf8)
                for m in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    found.insert(String(text[Range(m.range(at: 1), in: text)!]))
                }
            }
            result[module] = found.subtracting([module])
        }
        return result
    }

    /// The module table: each module's "depends on" cell, as Herald modules (`nil`: "all of the above").
    static func table() throws -> [String: Set<String>?] {
        var result: [String: Set<String>?] = [:]
        for line in try document.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3 else { continue }
            let module = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let column = cells[cells.count - 1]
            if column.contains("all of the above") {
                result[module] = .some(nil)
                continue
            }
            let names = column.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " `")) }
            result[module] = Set(names.compactMap { shortNames[$0] })
        }
        return result
    }

    /// The graph block's edges: `A, B ◀── C, D (and libraries)` says C and D depend on A and B.
    static func graph() throws -> [String: Set<String>] {
        var edges: [String: Set<String>] = [:]
        for line in try document.split(separator: "\n") where line.contains("◀──") {
            let sides = line.components(separatedBy: "◀──")
            func modules(_ side: String) -> [String] {
                let bare = side.replacingOccurrences(of: #"\([^)]*\)"#, with: "", options: .regularExpression)
                return bare.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasPrefix("Herald") || $0 == "herald" || $0 == "herald-strings" }
            }
            for i in 1..<sides.count {
                for user in modules(sides[i]) { edges[user, default: []].formUnion(modules(sides[i - 1])) }
            }
        }
        return edges
    }

    static func closure(_ edges: [String: Set<String>], from start: String) -> Set<String> {
        var seen = Set<String>(), stack = Array(edges[start] ?? [])
        while let next = stack.popLast() {
            if seen.insert(next).inserted { stack += edges[next] ?? [] }
        }
        return seen
    }

    @Test("every module's row names exactly the Herald modules its files import")
    func tableMatchesImports() throws {
        let imports = try Self.imports(), table = try Self.table()
        for (module, imported) in imports.sorted(by: { $0.key < $1.key }) {
            let row = try #require(table[module], "docs/architecture.md has no row for \(module)")
            guard let listed = row else { continue }
            #expect(listed == imported, "\(module): the table lists \(listed.sorted()), its files import \(imported.sorted())")
        }
    }

    @Test("every import follows the graph's arrows, and every arrow is a real dependency")
    func graphMatchesImports() throws {
        let imports = try Self.imports(), edges = try Self.graph()
        #expect(edges.count > 10, "the graph block was not found")
        for (module, imported) in imports {
            let allowed = Self.closure(edges, from: module)
            for d in imported.sorted() where !allowed.contains(d) {
                Issue.record("\(module) imports \(d): the graph has no path \(module) → \(d) (a floor pointing up?)")
            }
        }
        for (user, used) in edges {
            let real = Self.closure(imports, from: user)
            for d in used.sorted() where !real.contains(d) {
                Issue.record("the graph says \(user) depends on \(d); its imports do not reach it")
            }
        }
    }

    /// Each initialiser's body in `text`: from a line declaring `init(` to the brace closing its body.
    static func initialiserBodies(_ text: String) throws -> [Substring] {
        let declaration = try NSRegularExpression(
            pattern: #"^\s*(?:@\w+\s+)*(?:(?:public|package|private|fileprivate|internal|convenience|required|override|nonisolated)\s+)*init[?!]?\s*[(<]"#,
            options: .anchorsMatchLines)
        var bodies: [Substring] = []
        for m in declaration.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let start = Range(m.range, in: text)!.upperBound
            guard let open = text[start...].firstIndex(of: "{") else { continue }
            var depth = 0, i = open
            repeat {
                if text[i] == "{" { depth += 1 } else if text[i] == "}" { depth -= 1 }
                i = text.index(after: i)
            } while depth > 0 && i < text.endIndex
            bodies.append(text[open..<i])
        }
        return bodies
    }

    @Test("no unstructured Task in an initialiser: a service's run() owns its tasks (issue 27)")
    func noTaskInInitialisers() throws {
        let sources = repositoryRoot().appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        #expect(files.count > 100)
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for body in try Self.initialiserBodies(text) where body.range(of: #"(^|[^.\w])Task(<[^>]*>)? *\{"#, options: .regularExpression) != nil {
                Issue.record("Sources/\(file): an initialiser starts a Task: \(body.prefix(120))…")
            }
        }
    }

    @Test("the top floors (issue 27): HeraldPostgres imports only Core and Store; HeraldService no queue and no transport")
    func topFloors() throws {
        let imports = try Self.imports()
        #expect(imports["HeraldPostgres"] == ["HeraldCore", "HeraldStore"])
        let service = try #require(imports["HeraldService"])
        #expect(service.isDisjoint(with: ["HeraldPostgres", "HeraldBinary", "HeraldGateway", "HeraldHTTP2Transport", "HeraldHTTP2"]), "\(service)")
    }
}
