import Foundation
import HeraldCore
import HeraldLocalization
import Testing
@testable import HeraldKit
import HeraldJSON

/// The `localize.*` configuration keys and the localize stage the assembly picks.
@Suite struct LocalizationConfigurationTests {
    func configuration(_ json: String, file: String = "/etc/herald/herald.json") throws -> HeraldConfiguration {
        guard case .object(let o) = try JSONParser.parse(json) else { throw ConfigError(file: file, key: "", message: "not an object") }
        return try HeraldConfiguration.parse(ConfigNode(file: file, object: o))
    }

    @Test func readsTheLocalizeKeys() throws {
        let c = try configuration(#"{"localize":{"mode":"server","catalogs":"Catalogs","fallback":["es","fr"],"defaultLanguage":"en-GB","table":"Alerts"}}"#)
        #expect(c.localization == .server)
        #expect(c.catalogs == "/etc/herald/Catalogs")  // relative to the configuration file
        #expect(c.localizationFallback == ["es", "fr"])
        #expect(c.defaultLanguage == "en-GB")
        #expect(c.localizationTable == "Alerts")
        #expect(try configuration(#"{"localize":{"catalogs":"/srv/catalogs"}}"#).catalogs == "/srv/catalogs")
        let defaults = try configuration("{}")
        #expect(defaults.catalogs == nil && defaults.localization == .client && defaults.defaultLanguage == "en")
    }

    @Test(arguments: [
        (#"{"localize":{"mode":"device"}}"#, "localize.mode"),
        (#"{"localize":{"fallback":"es"}}"#, "localize.fallback"),
        (#"{"localize":{"fallback":["es", "1"]}}"#, "localize.fallback"),
        (#"{"localize":{"defaultLanguage":"??"}}"#, "localize.defaultLanguage"),
        (#"{"localize":{"catalogs":""}}"#, "localize.catalogs"),
    ])
    func badValuesNameTheKey(_ json: String, _ key: String) {
        #expect {
            try configuration(json)
        } throws: { error in
            (error as? ConfigError)?.key == key
        }
    }

    @Test func serverModeNeedsCatalogs() throws {
        var c = HeraldConfiguration()
        c.localization = .server
        #expect(throws: ConfigError.self) { try HeraldAssembly(configuration: c).localizeStage() }
        c.localization = .client
        #expect(try HeraldAssembly(configuration: c).localizeStage() is LocalizeStage<KeyCheckingLocalizer>)
    }

    @Test func catalogsAreLoadedAtAssembly() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/herald-kit-loc-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/fr.lproj", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/en.lproj", withIntermediateDirectories: true)
        try Data("\"HI\" = \"Bonjour %@\";".utf8).write(to: URL(fileURLWithPath: dir + "/fr.lproj/Localizable.strings"))
        try Data("\"HI\" = \"Hello %@\";".utf8).write(to: URL(fileURLWithPath: dir + "/en.lproj/Localizable.strings"))
        var c = HeraldConfiguration()
        c.catalogs = dir
        c.localization = .server
        let stage = try #require(try HeraldAssembly(configuration: c).localizeStage() as? LocalizeStage<CatalogLocalizer>)
        var alert = Alert()
        alert.locKey = "HI"
        alert.locArgs = ["Zoë"]
        var aps = APS()
        aps.alert = alert
        var envelope = Envelope(sequence: 0, request: NotificationRequest(token: DeviceToken(bytes: [1]), aps: aps, language: "fr-CA"))
        try stage.apply(&envelope)
        #expect(envelope.request.aps.alert?.body == "Bonjour Zoë")

        c.defaultLanguage = "de"
        #expect(throws: ConfigError.self) { try HeraldAssembly(configuration: c).localizeStage() }
        c.catalogs = dir + "/missing"
        #expect(throws: CatalogError.self) { try HeraldAssembly(configuration: c).localizeStage() }
    }
}
