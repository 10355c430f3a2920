import ArgumentParser
import HeraldCore
import HeraldKit

/// `--catalogs DIR` and `--localize server|client`, shared by the commands
/// that run the localize stage (`herald send`, `herald payload`):
///
/// ```swift
/// @OptionGroup var localization: LocalizationOptions
/// …
/// localization.apply(to: &configuration)
/// ```
struct LocalizationOptions: ParsableArguments {
    @Option(
        name: .customLong("catalogs"),
        help: ArgumentHelp(
            "String catalogs: a folder of <language>.lproj/*.strings and *.xcstrings (or one .xcstrings file).",
            valueName: "dir"))
    var catalogs: String?

    @Option(
        name: .customLong("localize"),
        help: ArgumentHelp(
            "Localization mode for requests that don't choose one: server (render the text) or client (check and pass the keys).",
            valueName: "mode"))
    var mode: Mode?

    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case server, client
    }

    /// Overrides the configuration's `localize.catalogs` and `localize.mode`.
    func apply(to configuration: inout HeraldConfiguration) {
        if let catalogs { configuration.catalogs = catalogs }
        if let mode { configuration.localization = LocalizationMode(rawValue: mode.rawValue) }
    }
}

/// Reads the configuration file if one is given, else the defaults; errors are setup errors (exit 1).
func loadConfiguration(_ path: String?) throws(SetupError) -> HeraldConfiguration {
    guard let path else { return HeraldConfiguration() }
    do { return try HeraldConfiguration.load(path: path) } catch { throw SetupError("\(error)") }
}
