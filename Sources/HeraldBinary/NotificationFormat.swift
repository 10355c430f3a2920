import HeraldCore

/// The binary interface's notification formats, named by their command byte.
///
/// A struct with static members, so a format can be added without breaking anyone.
public struct NotificationFormat: Sendable, Hashable, CustomStringConvertible {
    /// The first byte of every notification in this format.
    public let command: UInt8
    /// The name used on the command line and in configuration.
    public let name: String
    init(command: UInt8, name: String) {
        self.command = command
        self.name = name
    }
    /// Command 0: `|0|token length (2)|token|payload length (2)|payload|`. No identifier, no expiry;
    /// APNs closes the connection on an error without saying why.
    public static let simple = NotificationFormat(command: 0, name: "simple")
    /// Command 1: `|1|identifier (4)|expiry (4)|token length (2)|token|payload length (2)|payload|`.
    public static let enhanced = NotificationFormat(command: 1, name: "enhanced")
    /// Command 2: `|2|frame length (4)|items…|`, each item `|id (1)|length (2)|data|`: token (1),
    /// payload (2), identifier (3), expiry (4), priority (5).
    public static let frame = NotificationFormat(command: 2, name: "frame")
    /// The formats, by command.
    public static let all: [NotificationFormat] = [.simple, .enhanced, .frame]
    /// Looks a format up by name (`simple`, `enhanced`, `frame`).
    public static func named(_ name: String) -> NotificationFormat? { all.first { $0.name == name } }
    /// Looks a format up by command byte.
    public static func command(_ command: UInt8) -> NotificationFormat? {
        command < 3 ? all[Int(command)] : nil
    }
    /// Whether notifications in this format carry an identifier (and so get error responses).
    public var hasIdentifier: Bool { command != 0 }
    public var description: String { name }
}

/// The item identifiers of the frame format (command 2).
public enum FrameItem {
    public static let deviceToken: UInt8 = 1
    public static let payload: UInt8 = 2
    public static let identifier: UInt8 = 3
    public static let expiry: UInt8 = 4
    public static let priority: UInt8 = 5
}
