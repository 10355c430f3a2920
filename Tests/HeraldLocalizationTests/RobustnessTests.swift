import PropertyBased
import Testing
@testable import HeraldLocalization

/// Hostile or broken input never crashes: it parses, or it is an error naming where.
@Suite struct RobustnessTests {
    /// Bytes drawn mostly from the characters that matter to the `.strings` grammar.
    static let grammarBytes: [UInt8] = Array("\"\\=;/*{} \n\rUu0D8aé%@$".utf8) + [0xFF, 0xFE, 0x00, 0xD8, 0xDC]

    @Test func randomStringsFilesParseOrFailWithAPosition() async {
        let bytes = Gen.int(in: 0...(Self.grammarBytes.count - 1)).map { Self.grammarBytes[$0] }.array(of: 0...60)
        await propertyCheck(count: 2000, input: bytes) { b in
            do throws(CatalogError) {
                _ = try StringsFileParser.parse(b, file: "fuzz.strings")
            } catch {
                #expect(error.file == "fuzz.strings")
                #expect(error.line >= 0 && error.column >= 0)
            }
        }
    }

    static let templateCharacters: [Character] = Array("%@$1239.-+ #'0dilluqhzfFeEgGsSxXonp*LAx ")

    static let argumentCharacters: [Character] = Array("0123456789-+. eaé%@x")

    @Test func randomTemplatesCompileOrFailAndRenderOrFail() async {
        let template = Gen.int(in: 0...(Self.templateCharacters.count - 1)).map { Self.templateCharacters[$0] }.array(of: 0...16).map { String($0) }
        let argument = Gen.int(in: 0...(Self.argumentCharacters.count - 1)).map { Self.argumentCharacters[$0] }.array(of: 0...8).map { String($0) }
        await propertyCheck(count: 3000, input: template, argument.array(of: 0...4)) { text, args in
            guard let t = try? FormatTemplate(compiling: text) else { return }
            // Any arguments: a text or a FormatError, never a crash.
            _ = try? t.render(args)
            if args.count == t.argumentCount, t.segments.allSatisfy({ if case .argument(let a) = $0 { a.conversion == .string } else { true } }) {
                #expect((try? t.render(args)) != nil)
            }
        }
    }
}
