import ArgumentParser
import HeraldBinary
import HeraldSimulator

// Typed command-line values: ArgumentParser checks them and lists the choices in --help.



/// How `herald decode` reads its input.
enum InputEncoding: String, CaseIterable, ExpressibleByArgument {
    case auto, hex, raw
}

/// What the size guard does with a payload over the limit.
enum SizePolicyArgument: String, CaseIterable, ExpressibleByArgument {
    case reject, truncate
}

/// What the simulator does with a token its registry does not know.
enum UnknownTokensArgument: String, CaseIterable, ExpressibleByArgument {
    case deliver, invalid
    var policy: UnknownTokenPolicy { self == .invalid ? .invalid : .deliver }
}

extension NotificationFormat: ExpressibleByArgument {
    public init?(argument: String) {
        guard let f = NotificationFormat.named(argument) else { return nil }
        self = f
    }
    public static var allValueStrings: [String] { NotificationFormat.all.map(\.name) }
}
